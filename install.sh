#!/usr/bin/env bash
# First version: copy the plugin files into opencode's global plugin directory.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
config_dir=${OPENCODE_CONFIG_DIR:-${XDG_CONFIG_HOME:-$HOME/.config}/opencode}
mkdir -p "$config_dir/plugins"
for f in loop-guard.ts semantic-anchors.ts; do
  [ -f "$here/$f" ] || continue
  cp "$here/$f" "$config_dir/plugins/$f"
  echo "installed $config_dir/plugins/$f"
done
echo "restart opencode to load the plugins"

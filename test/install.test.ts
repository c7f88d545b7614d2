// Tests of install.sh: every option runs the real script with `bash install.sh ...` against a throw-away world
// (temporary HOME, XDG config dir, a source checkout) made with fs.mkdtempSync; never the real ~/.config.
// The --check tests run the real opencode of the dev toolchain (node_modules/.bin/opencode) in its sandbox, and one
// older release from the version matrix's cache (test/hosts.sh --install-only).
import { afterEach, describe, expect, test } from "bun:test"
import { spawnSync } from "node:child_process"
import crypto from "node:crypto"
import fs from "node:fs"
import os from "node:os"
import path from "node:path"
import { fileURLToPath } from "node:url"

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
const realOpencode = path.join(repo, "node_modules", ".bin", "opencode")
const PLUGIN_FILES = ["loop-guard.ts", "semantic-anchors.ts", "opencode-semantic-anchors.schema.json"]
const MANIFEST = "opencode-guards.sha256"
/** What install.sh needs beside the plugin files: the version sources and the doctor. */
const PRODUCT_FILES = [
  "install.sh",
  "package.json",
  "opencode-versions.json",
  "doctor/check.mjs",
  "doctor/contracts.mjs",
  "doctor/fake-llm.mjs",
  "doctor/sandbox.mjs",
]
const VERSIONS: { pinned: string; newest: string; oldest: string; v2follows: string; v2commit: string } = JSON.parse(
  fs.readFileSync(path.join(repo, "opencode-versions.json"), "utf8"),
)
VERSIONS.newest ??= VERSIONS.pinned // the top of the tested range; pinned is the release npm installs
const RANGE = VERSIONS.oldest === VERSIONS.newest ? VERSIONS.newest : `${VERSIONS.oldest} to ${VERSIONS.newest}`
/** A version next to `v`: its patch level moved by `by` (clamped at 0). */
const patchOf = (v: string, by: number) => {
  const [major, minor, patch] = v.split(".").map(Number)
  return `${major}.${minor}.${Math.max(0, patch! + by)}`
}
// OpenCode 2 (the major version of VERSIONS.v2follows) installs with a note; the major version after it is refused.
const majorAbove = `${Number(VERSIONS.v2follows.split(".")[0]) + 1}.0.0`
const v2Release = VERSIONS.v2follows
/** An older version than the oldest tested one (a lower minor if the patch level is already 0). */
const belowRange = (() => {
  const [major, minor, patch] = VERSIONS.oldest.split(".").map(Number)
  return patch! > 0 ? `${major}.${minor}.${patch! - 1}` : `${major}.${Math.max(0, minor! - 1)}.99`
})()

/**
 * Every file of the repository but test/ and bench/ (tracked or new, not ignored): what a user's copy needs.
 * Relative paths.
 */
function repositoryWithoutTests(): string[] {
  const r = spawnSync("git", ["ls-files", "--cached", "--others", "--exclude-standard"], {
    cwd: repo,
    encoding: "utf8",
  })
  if (r.status !== 0) throw new Error(`git ls-files failed: ${r.stderr}`)
  return r.stdout.split("\n").filter((f) => f && !/^(test|bench)\//.test(f) && fs.existsSync(path.join(repo, f)))
}

const copyInto = (dir: string, rel: string) => {
  fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true })
  fs.copyFileSync(path.join(repo, rel), path.join(dir, rel))
}

const sha256 = (data: string | Buffer) => crypto.createHash("sha256").update(data).digest("hex")

/** PATH without any directory that holds an `opencode` (npm test puts node_modules/.bin first). */
function pathWithoutOpencode(): string {
  return (process.env.PATH ?? "/usr/bin:/bin")
    .split(":")
    .filter((dir) => dir && !fs.existsSync(path.join(dir, "opencode")))
    .join(":")
}

interface World {
  root: string
  home: string
  xdg: string
  /** XDG_CONFIG_HOME/opencode/plugins: where a default install lands. */
  plugins: string
  /**
   * A checkout to install from: install.sh with what it needs (PRODUCT_FILES) plus whatever plugin files a test puts
   * there, or with "repo" a copy of the whole repository without test/ and bench/.
   */
  src: string
  tmp: string
  bin: string
  /** Environment for the installer: nothing of the developer's (no OPENCODE_CONFIG_DIR leaking in). */
  env: Record<string, string>
  cleanup(): void
}

function makeWorld(sources: Record<string, string> | "repo" = placeholderSources()): World {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "install-test-"))
  const home = path.join(root, "home")
  const xdg = path.join(root, "xdg")
  const src = path.join(root, "src")
  const tmp = path.join(root, "tmp")
  const bin = path.join(root, "bin")
  for (const d of [home, xdg, src, tmp, bin]) fs.mkdirSync(d, { recursive: true })
  if (sources === "repo") {
    for (const f of repositoryWithoutTests()) copyInto(src, f)
  } else {
    for (const f of PRODUCT_FILES) copyInto(src, f)
    for (const [f, text] of Object.entries(sources)) fs.writeFileSync(path.join(src, f), text)
  }
  return {
    root,
    home,
    xdg,
    plugins: path.join(xdg, "opencode", "plugins"),
    src,
    tmp,
    bin,
    env: { PATH: `${bin}:${pathWithoutOpencode()}`, HOME: home, XDG_CONFIG_HOME: xdg, TMPDIR: tmp, LANG: "C.UTF-8" },
    cleanup: () => fs.rmSync(root, { recursive: true, force: true }),
  }
}

/** Stand-ins for the plugin files: installing is about files, not about what is in them. */
function placeholderSources(version = 1): Record<string, string> {
  return {
    "loop-guard.ts": `// loop-guard placeholder v${version}\n`,
    "semantic-anchors.ts": `// semantic-anchors placeholder v${version}\n`,
    "opencode-semantic-anchors.schema.json": `{"$comment": "schema placeholder v${version}"}\n`,
  }
}

interface Result {
  code: number
  stdout: string
  stderr: string
  out: string
}

function runInstaller(
  world: World,
  args: string[],
  opts: { env?: Record<string, string | undefined>; cwd?: string; script?: string; timeoutMs?: number } = {},
): Result {
  const env: Record<string, string> = { ...world.env }
  for (const [k, v] of Object.entries(opts.env ?? {})) {
    if (v === undefined) delete env[k]
    else env[k] = v
  }
  const r = spawnSync("bash", [opts.script ?? path.join(world.src, "install.sh"), ...args], {
    env,
    cwd: opts.cwd ?? world.root,
    encoding: "utf8",
    timeout: opts.timeoutMs ?? 60_000,
  })
  const stdout = r.stdout ?? ""
  const stderr = r.stderr ?? ""
  return { code: r.status ?? -1, stdout, stderr, out: stdout + stderr }
}

/** A fake `opencode` that prints the given text for --version (and exits with the given code). */
function stubOpencode(dir: string, versionOutput: string, exitCode = 0): string {
  const file = path.join(dir, "opencode")
  fs.writeFileSync(file, `#!/bin/sh\nprintf '%s\\n' '${versionOutput}'\nexit ${exitCode}\n`)
  fs.chmodSync(file, 0o755)
  return file
}

/** Every entry under dir: relative path -> "dir", "link:<target>" or "file:<sha256>:<mode>:<mtime>". */
function snapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {}
  const walk = (d: string) => {
    if (!fs.existsSync(d)) return
    for (const name of fs.readdirSync(d).sort()) {
      const p = path.join(d, name)
      const rel = path.relative(dir, p)
      const st = fs.lstatSync(p)
      if (st.isSymbolicLink()) out[rel] = `link:${fs.readlinkSync(p)}`
      else if (st.isDirectory()) {
        out[rel] = "dir"
        walk(p)
      } else out[rel] = `file:${sha256(fs.readFileSync(p))}:${st.mode}:${st.mtimeMs}`
    }
  }
  walk(dir)
  return out
}

/** The manifest as { name: hash }, or null when there is none. */
function readManifest(pluginsDir: string): Record<string, string> | null {
  const file = path.join(pluginsDir, MANIFEST)
  if (!fs.existsSync(file)) return null
  const entries: Record<string, string> = {}
  for (const line of fs.readFileSync(file, "utf8").split("\n")) {
    if (!line) continue
    const m = /^([0-9a-f]{64}) {2}(\S+)$/.exec(line)
    if (!m) throw new Error(`malformed manifest line: ${JSON.stringify(line)}`)
    entries[m[2]!] = m[1]!
  }
  return entries
}

const read = (file: string) => fs.readFileSync(file, "utf8")

// ---------------------------------------------------------------------------------------------------------------

const worlds: World[] = []
function world(sources?: Record<string, string> | "repo"): World {
  const w = makeWorld(sources)
  worlds.push(w)
  return w
}
afterEach(() => {
  for (const w of worlds.splice(0)) w.cleanup()
})

const BACKUP = /^(.+)\.backup-\d{8}-\d{6}(-\d+)?$/
const backupsIn = (dir: string) => fs.readdirSync(dir).filter((f) => BACKUP.test(f))

describe("fresh install", () => {
  test("copies the three files into XDG_CONFIG_HOME/opencode/plugins and records their sha256", () => {
    const w = world()
    const r = runInstaller(w, [])
    expect(r.code).toBe(0)
    for (const f of PLUGIN_FILES) expect(read(path.join(w.plugins, f))).toBe(read(path.join(w.src, f)))
    expect(readManifest(w.plugins)).toEqual(
      Object.fromEntries(PLUGIN_FILES.map((f) => [f, sha256(fs.readFileSync(path.join(w.src, f)))])),
    )
    expect(fs.readdirSync(w.plugins).sort()).toEqual([...PLUGIN_FILES, MANIFEST].sort())
    expect(r.stdout).toContain("Restart opencode")
    expect(r.stdout).toContain("opencode is not on PATH: installing anyway")
    expect(fs.readdirSync(w.home)).toEqual([]) // XDG_CONFIG_HOME wins over HOME
  })

  test("the manifest is in sha256sum --check format", () => {
    const w = world()
    runInstaller(w, [])
    const r = spawnSync("sha256sum", ["--check", MANIFEST], { cwd: w.plugins, encoding: "utf8" })
    expect(r.status).toBe(0)
    expect(r.stdout.trim().split("\n").sort()).toEqual(PLUGIN_FILES.map((f) => `${f}: OK`).sort())
  })

  test.each([
    [
      "HOME/.config/opencode when XDG_CONFIG_HOME is unset",
      { XDG_CONFIG_HOME: undefined },
      [],
      "home/.config/opencode",
    ],
    ["OPENCODE_CONFIG_DIR over XDG_CONFIG_HOME", { OPENCODE_CONFIG_DIR: "$root/ocd" }, [], "ocd"],
    ["--dir over OPENCODE_CONFIG_DIR", { OPENCODE_CONFIG_DIR: "$root/ocd" }, ["--dir", "$root/given"], "given"],
    ["--dir=DIR form", {}, ["--dir=$root/given"], "given"],
    ["a relative --dir, against the working directory", {}, ["--dir", "rel/cfg"], "rel/cfg"],
  ])("config dir: %s", (_name, env, args, expected) => {
    const w = world()
    const fill = (s: string) => s.replace("$root", w.root)
    const envFilled = Object.fromEntries(
      Object.entries(env).map(([k, v]) => [k, v === undefined ? undefined : fill(v)]),
    )
    const r = runInstaller(w, args.map(fill), { env: envFilled })
    expect(r.code).toBe(0)
    const pluginsDir = path.join(w.root, expected, "plugins")
    for (const f of PLUGIN_FILES) expect(fs.existsSync(path.join(pluginsDir, f))).toBe(true)
    expect(readManifest(pluginsDir)).not.toBeNull()
    if (expected !== "home/.config/opencode") expect(fs.existsSync(w.plugins)).toBe(false)
  })

  test("installs the files that exist and names the ones it skipped", () => {
    const w = world({ "loop-guard.ts": "// only loop-guard\n" })
    const r = runInstaller(w, [])
    expect(r.code).toBe(0)
    expect(fs.readdirSync(w.plugins).sort()).toEqual(["loop-guard.ts", MANIFEST].sort())
    expect(r.stdout).toContain("skipped semantic-anchors.ts: not in this checkout")
    expect(r.stdout).toContain("skipped opencode-semantic-anchors.schema.json: not in this checkout")
  })

  test("nothing to install: exit 1, says what to do, writes nothing", () => {
    const w = world({})
    const before = snapshot(w.root)
    const r = runInstaller(w, [])
    expect(r.code).toBe(1)
    expect(r.stderr).toContain("nothing to install")
    expect(r.stderr).toContain("complete checkout")
    expect(snapshot(w.root)).toEqual(before)
  })

  test("the repository's own install.sh installs every plugin file present in the checkout, byte for byte", () => {
    const w = world()
    const r = runInstaller(w, [], { script: path.join(repo, "install.sh") })
    expect(r.code).toBe(0)
    for (const f of PLUGIN_FILES) {
      if (fs.existsSync(path.join(repo, f))) expect(read(path.join(w.plugins, f))).toBe(read(path.join(repo, f)))
      else expect(r.stdout).toContain(`skipped ${f}`)
    }
  })
})

describe("re-install", () => {
  test("is idempotent: exit 0, up to date, not one byte or timestamp changes", () => {
    const w = world()
    runInstaller(w, [])
    const before = snapshot(w.root)
    const r = runInstaller(w, [])
    expect(r.code).toBe(0)
    expect(r.stdout).toContain("already up to date")
    expect(r.stdout.match(/up to date: /g)?.length).toBe(3)
    expect(snapshot(w.root)).toEqual(before)
  })

  test("updates owned files to a new version and records the new hashes, without backups", () => {
    const w = world()
    runInstaller(w, [])
    for (const [f, text] of Object.entries(placeholderSources(2))) fs.writeFileSync(path.join(w.src, f), text)
    const r = runInstaller(w, [])
    expect(r.code).toBe(0)
    expect(r.stdout).toContain(`update ${path.join(w.plugins, "loop-guard.ts")}`)
    for (const [f, text] of Object.entries(placeholderSources(2))) {
      expect(read(path.join(w.plugins, f))).toBe(text)
      expect(readManifest(w.plugins)![f]).toBe(sha256(text))
    }
    expect(backupsIn(w.plugins)).toEqual([])
  })

  test("adopts an identical copy it did not record (e.g. from the first install.sh) without a backup", () => {
    const w = world()
    fs.mkdirSync(w.plugins, { recursive: true })
    fs.copyFileSync(path.join(w.src, "loop-guard.ts"), path.join(w.plugins, "loop-guard.ts"))
    const r = runInstaller(w, [])
    expect(r.code).toBe(0)
    expect(r.stdout).toContain("identical content, now recorded")
    expect(Object.keys(readManifest(w.plugins)!).sort()).toEqual([...PLUGIN_FILES].sort())
    expect(backupsIn(w.plugins)).toEqual([])
  })
})

describe("files it does not own", () => {
  const cases: [string, (w: World) => void][] = [
    [
      "a foreign file",
      (w) => fs.writeFileSync(path.join(w.plugins, "loop-guard.ts"), "// the user's own loop-guard\n"),
    ],
    ["a directory", (w) => fs.mkdirSync(path.join(w.plugins, "loop-guard.ts"))],
    [
      "a symlink to the user's file",
      (w) => {
        fs.writeFileSync(path.join(w.root, "mine.ts"), "// the user's file\n")
        fs.symlinkSync(path.join(w.root, "mine.ts"), path.join(w.plugins, "loop-guard.ts"))
      },
    ],
    [
      "a dangling symlink",
      (w) => fs.symlinkSync(path.join(w.root, "nowhere.ts"), path.join(w.plugins, "loop-guard.ts")),
    ],
  ]

  test.each(cases)("%s in the way: refused with exit 3, nothing written at all", (_name, setUp) => {
    const w = world()
    fs.mkdirSync(w.plugins, { recursive: true })
    setUp(w)
    const before = snapshot(w.root)
    const r = runInstaller(w, [])
    expect(r.code).toBe(3)
    expect(r.stderr).toContain(`${path.join(w.plugins, "loop-guard.ts")} exists and was not installed by install.sh`)
    expect(r.stderr).toContain("nothing was written")
    expect(r.stderr).toContain("--force")
    expect(snapshot(w.root)).toEqual(before) // not even semantic-anchors.ts or a manifest
  })

  test.each(cases)(
    "%s with --force: moved to a timestamped backup that opencode does not load, then installed",
    (_name, setUp) => {
      const w = world()
      fs.mkdirSync(w.plugins, { recursive: true })
      setUp(w)
      const target = path.join(w.plugins, "loop-guard.ts")
      const old = snapshot(w.plugins)["loop-guard.ts"]
      const outside = snapshot(w.root)["mine.ts"]
      const r = runInstaller(w, ["--force"])
      expect(r.code).toBe(0)
      const backups = backupsIn(w.plugins)
      expect(backups.length).toBe(1)
      expect(backups[0]!.startsWith("loop-guard.ts.backup-")).toBe(true)
      expect(/\.(ts|js)$/.test(backups[0]!)).toBe(false)
      expect(r.stdout).toContain(`move the existing ${target} to ${path.join(w.plugins, backups[0]!)}`)
      // the backup is the old entry, moved as it was (content, or the link itself)
      expect(snapshot(w.plugins)[backups[0]!]?.split(":").slice(0, 2)).toEqual(old!.split(":").slice(0, 2))
      expect(fs.lstatSync(target).isFile()).toBe(true)
      expect(read(target)).toBe(read(path.join(w.src, "loop-guard.ts")))
      expect(readManifest(w.plugins)!["loop-guard.ts"]).toBe(sha256(read(target)))
      expect(snapshot(w.root)["mine.ts"]).toBe(outside) // a symlink's target is never written through
    },
  )

  test("an owned file the user edited is not overwritten on re-install; --force keeps the edit in a backup", () => {
    const w = world()
    runInstaller(w, [])
    const target = path.join(w.plugins, "loop-guard.ts")
    fs.appendFileSync(target, "// my tuning\n")
    const edited = read(target)
    for (const [f, text] of Object.entries(placeholderSources(2))) fs.writeFileSync(path.join(w.src, f), text)
    const before = snapshot(w.root)
    const refused = runInstaller(w, [])
    expect(refused.code).toBe(3)
    expect(refused.stderr).toContain(`${target} was installed by install.sh but you changed it since`)
    expect(snapshot(w.root)).toEqual(before)

    const forced = runInstaller(w, ["--force"])
    expect(forced.code).toBe(0)
    const [backup] = backupsIn(w.plugins)
    expect(read(path.join(w.plugins, backup!))).toBe(edited)
    expect(read(target)).toBe(placeholderSources(2)["loop-guard.ts"]!)
  })

  test("warns about a second copy in plugin/ (singular), which opencode would also load", () => {
    const w = world()
    fs.mkdirSync(path.join(w.xdg, "opencode", "plugin"), { recursive: true })
    fs.writeFileSync(path.join(w.xdg, "opencode", "plugin", "loop-guard.ts"), "// older manual copy\n")
    const r = runInstaller(w, [])
    expect(r.code).toBe(0)
    expect(r.stderr).toContain("plugin/loop-guard.ts also exists and opencode loads it too")
  })
})

describe("--uninstall", () => {
  test("removes exactly the owned files and the manifest; leaves the user's files", () => {
    const w = world()
    runInstaller(w, [])
    fs.writeFileSync(path.join(w.plugins, "my-plugin.ts"), "// the user's\n")
    const r = runInstaller(w, ["--uninstall"])
    expect(r.code).toBe(0)
    expect(fs.readdirSync(w.plugins)).toEqual(["my-plugin.ts"])
    expect(r.stdout).toContain("Restart opencode")
  })

  test("leaves a same-name file it does not own", () => {
    const w = world()
    fs.mkdirSync(w.plugins, { recursive: true })
    fs.writeFileSync(path.join(w.plugins, "loop-guard.ts"), "// not ours\n")
    const before = snapshot(w.root)
    const r = runInstaller(w, ["--uninstall"])
    expect(r.code).toBe(0)
    expect(r.stdout).toContain("left alone")
    expect(snapshot(w.root)).toEqual(before)
  })

  test("keeps an owned file the user edited (exit 3, warning, still recorded); --force moves it to a backup", () => {
    const w = world()
    runInstaller(w, [])
    const target = path.join(w.plugins, "semantic-anchors.ts")
    fs.writeFileSync(target, "// edited by the user\n")
    const kept = runInstaller(w, ["--uninstall"])
    expect(kept.code).toBe(3)
    expect(kept.stderr).toContain(`kept ${target}: you changed it since`)
    expect(kept.stderr).toContain("--uninstall --force")
    expect(fs.readdirSync(w.plugins).sort()).toEqual([MANIFEST, "semantic-anchors.ts"])
    expect(read(target)).toBe("// edited by the user\n")
    expect(Object.keys(readManifest(w.plugins)!)).toEqual(["semantic-anchors.ts"])

    const forced = runInstaller(w, ["--uninstall", "--force"])
    expect(forced.code).toBe(0)
    const entries = fs.readdirSync(w.plugins)
    expect(entries.length).toBe(1)
    expect(entries[0]).toMatch(BACKUP)
    expect(read(path.join(w.plugins, entries[0]!))).toBe("// edited by the user\n")
  })

  test("an owned file already deleted by the user is dropped from the manifest", () => {
    const w = world()
    runInstaller(w, [])
    fs.rmSync(path.join(w.plugins, "loop-guard.ts"))
    const r = runInstaller(w, ["--uninstall"])
    expect(r.code).toBe(0)
    expect(r.stdout).toContain("already gone")
    expect(fs.readdirSync(w.plugins)).toEqual([])
  })

  test("needs no supported opencode: a stub reporting 0.1.0 does not stop it", () => {
    const w = world()
    runInstaller(w, [])
    stubOpencode(w.bin, "0.1.0")
    const r = runInstaller(w, ["--uninstall"])
    expect(r.code).toBe(0)
    expect(fs.readdirSync(w.plugins)).toEqual([])
  })
})

describe("--dry-run", () => {
  const scenarios: [string, (w: World) => void, string[], RegExp[]][] = [
    [
      "fresh install",
      () => {},
      ["--dry-run"],
      [/would create .*\/plugins/, /would install .*loop-guard\.ts/, /would record ownership/],
    ],
    [
      "install with --force over a foreign file",
      (w) => {
        fs.mkdirSync(w.plugins, { recursive: true })
        fs.writeFileSync(path.join(w.plugins, "loop-guard.ts"), "// foreign\n")
      },
      ["--dry-run", "--force"],
      [
        /would move the existing .*loop-guard\.ts to .*loop-guard\.ts\.backup-\d{8}-\d{6}/,
        /would install .*loop-guard\.ts/,
      ],
    ],
    [
      "update",
      (w) => {
        runInstaller(w, [])
        fs.writeFileSync(path.join(w.src, "loop-guard.ts"), "// v2\n")
      },
      ["--dry-run"],
      [/would update .*loop-guard\.ts/, /up to date: .*semantic-anchors\.ts/],
    ],
    [
      "uninstall",
      (w) => void runInstaller(w, []),
      ["--dry-run", "--uninstall"],
      [/would remove .*loop-guard\.ts/, /would remove .*opencode-guards\.sha256/],
    ],
    [
      "--example-config",
      () => {},
      ["--dry-run", "--example-config"],
      [/would write an example .*opencode-semantic-anchors\.yaml/],
    ],
  ]
  test.each(scenarios)("%s: prints every action, writes nothing", (_name, setUp, args, expected) => {
    const w = world()
    setUp(w)
    const before = snapshot(w.root)
    const r = runInstaller(w, args)
    expect(r.code).toBe(0)
    for (const line of expected) expect(r.stdout).toMatch(line)
    expect(r.stdout).toContain("dry run: nothing was written")
    expect(snapshot(w.root)).toEqual(before)
  })

  test("a refusal is reported the same way in a dry run", () => {
    const w = world()
    fs.mkdirSync(w.plugins, { recursive: true })
    fs.writeFileSync(path.join(w.plugins, "semantic-anchors.ts"), "// foreign\n")
    const r = runInstaller(w, ["--dry-run"])
    expect(r.code).toBe(3)
    expect(r.stderr).toContain("was not installed by install.sh")
  })
})

describe("--only", () => {
  test.each([
    ["loop-guard", ["loop-guard.ts"]],
    ["semantic-anchors", ["opencode-semantic-anchors.schema.json", "semantic-anchors.ts"]],
  ])("--only %s installs that plugin's files only", (name, files) => {
    const w = world()
    const r = runInstaller(w, ["--only", name])
    expect(r.code).toBe(0)
    expect(fs.readdirSync(w.plugins).sort()).toEqual([...files, MANIFEST].sort())
    expect(Object.keys(readManifest(w.plugins)!).sort()).toEqual(files)
  })

  test("--uninstall --only loop-guard removes loop-guard and keeps semantic-anchors recorded", () => {
    const w = world()
    runInstaller(w, [])
    const r = runInstaller(w, ["--uninstall", "--only=loop-guard"])
    expect(r.code).toBe(0)
    expect(fs.existsSync(path.join(w.plugins, "loop-guard.ts"))).toBe(false)
    expect(Object.keys(readManifest(w.plugins)!).sort()).toEqual([
      "opencode-semantic-anchors.schema.json",
      "semantic-anchors.ts",
    ])
  })

  test("a foreign semantic-anchors.ts does not stop --only loop-guard", () => {
    const w = world()
    fs.mkdirSync(w.plugins, { recursive: true })
    fs.writeFileSync(path.join(w.plugins, "semantic-anchors.ts"), "// foreign\n")
    expect(runInstaller(w, ["--only", "loop-guard"]).code).toBe(0)
    expect(read(path.join(w.plugins, "semantic-anchors.ts"))).toBe("// foreign\n")
  })
})

describe("version gate", () => {
  // The versions come from opencode-versions.json, so the table holds when the tested range moves.
  const { oldest, pinned, newest } = VERSIONS
  const refused = (v: string) => `reports version ${v}`
  test.each([
    [
      "the newest tested version",
      newest,
      0,
      [],
      0,
      `opencode ${newest} ($stub): supported, in the tested range ${RANGE}`,
    ],
    ["the oldest tested version", oldest, 0, [], 0, `opencode ${oldest} ($stub): supported`],
    ["a prefixed tested version", `opencode ${newest}`, 0, [], 0, "supported"],
    [
      "a newer patch release",
      patchOf(newest, 1),
      0,
      [],
      0,
      `is newer than ${newest}, the newest tested version: not yet tested`,
    ],
    [
      "a newer minor release",
      `${newest.split(".")[0]}.${Number(newest.split(".")[1]) + 1}.0`,
      0,
      [],
      0,
      "not yet tested",
    ],
    [
      "a pre-release of the newest tested version",
      `${newest}-beta.1`,
      0,
      [],
      0,
      "a pre-release or build, not a tested release",
    ],
    ["the next major version", majorAbove, 0, [], 4, `${refused(majorAbove)}, another major version`],
    [
      "OpenCode 2",
      v2Release,
      0,
      [],
      0,
      `is OpenCode 2: the plugins follow its plugin API at ${v2Release} (anomalyco/opencode ${VERSIONS.v2commit.slice(0, 7)}), tested in a stand-in host built from that source, not yet in a released OpenCode 2. Installing;`,
    ],
    [
      "a version below the tested range",
      belowRange,
      0,
      [],
      4,
      `${refused(belowRange)}, older than ${oldest}, the oldest tested version`,
    ],
    ["an old major version", "0.9.1", 0, [], 4, `${refused("0.9.1")}, older than ${oldest}`],
    ["a failing --version", "boom", 1, [], 4, "did not report a version"],
    ["garbage output", "opencode: command not recognised", 0, [], 4, "did not report a version"],
    ["a version below the range with --force", belowRange, 0, ["--force"], 0, "installing anyway (--force)"],
    ["the next major version with --force", majorAbove, 0, ["--force"], 0, "installing anyway (--force)"],
  ])("opencode on PATH reporting %s", (_name, output, stubExit, args, code, message) => {
    const w = world()
    const stub = stubOpencode(w.bin, output, stubExit)
    const before = snapshot(w.root)
    const r = runInstaller(w, args)
    expect(r.code).toBe(code)
    expect(r.out).toContain(message.replace("$stub", stub))
    if (code === 4) {
      expect(r.stderr).toContain("Nothing was written")
      expect(r.stderr).toContain(`npm i -g opencode-ai@${pinned}`)
      expect(r.stderr).toContain("--force")
      expect(snapshot(w.root)).toEqual(before)
    } else {
      expect(fs.existsSync(path.join(w.plugins, "loop-guard.ts"))).toBe(true)
    }
    // Silent means silent: no warning for a tested version; an untested one is named with the way to prove it.
    if (message.includes("is OpenCode 2")) {
      expect(r.stderr).toContain("run ./install.sh --check to see that it lists both plugins as loaded")
    } else if (message.includes("not yet tested") || message.includes("not a tested release")) {
      expect(r.stderr).toContain("warning: ")
      expect(r.stderr).toContain("run ./install.sh --check to prove on this machine")
    } else if (code === 0 && !args.includes("--force")) {
      expect(r.stderr).toBe("")
    }
  })

  test("--opencode PATH is used instead of PATH", () => {
    const w = world()
    const other = path.join(w.root, "other")
    fs.mkdirSync(other)
    const stub = stubOpencode(other, "1.0.0")
    const r = runInstaller(w, ["--opencode", stub])
    expect(r.code).toBe(4)
    expect(r.stderr).toContain(`opencode at ${stub} reports version 1.0.0`)
  })

  test("--opencode that is not an executable is a usage error", () => {
    const w = world()
    const r = runInstaller(w, ["--opencode", path.join(w.root, "missing")])
    expect(r.code).toBe(2)
    expect(r.stderr).toContain("is not an executable file")
  })

  test("a release inside the range that the matrix could not install is not yet tested: installed with a warning", () => {
    const w = world()
    const gap = patchOf(VERSIONS.pinned, -1)
    const versions = {
      pinned: VERSIONS.pinned,
      oldest: patchOf(VERSIONS.pinned, -2),
      matrix: { notInstallable: [gap] },
    }
    fs.writeFileSync(
      path.join(w.src, "opencode-versions.json"),
      JSON.stringify(versions, null, 2).replace(/\[\s+/g, "[").replace(/\s+\]/g, "]"),
    )
    const stub = stubOpencode(w.bin, gap)
    const r = runInstaller(w, [])
    expect(r.code).toBe(0)
    expect(r.stderr).toContain(`warning: opencode ${gap} (${stub}) is inside the tested range`)
    expect(r.stderr).toContain("a release the suite could not be run on: not yet tested")
    // Its neighbour in the range is tested: silent.
    const next = stubOpencode(w.bin, patchOf(VERSIONS.pinned, -2))
    const r2 = runInstaller(w, [])
    expect(r2.code).toBe(0)
    expect(r2.stderr).toBe("")
    expect(r2.stdout).toContain(`opencode ${patchOf(VERSIONS.pinned, -2)} (${next}): supported`)
  })

  test("a missing opencode-versions.json is an error of the checkout (exit 1), not a refused opencode", () => {
    const w = world()
    fs.rmSync(path.join(w.src, "opencode-versions.json"))
    stubOpencode(w.bin, VERSIONS.pinned)
    const r = runInstaller(w, [])
    expect(r.code).toBe(1)
    expect(r.stderr).toContain("opencode-versions.json is missing")
    expect(r.stderr).toContain("complete checkout")
  })
})

describe("the plugins' version: package.json's, printed by an install and by --check", () => {
  const version: string = JSON.parse(fs.readFileSync(path.join(repo, "package.json"), "utf8")).version
  const setVersion = (w: World, v: string) => {
    const file = path.join(w.src, "package.json")
    fs.writeFileSync(file, fs.readFileSync(file, "utf8").replace(`"version": "${version}"`, `"version": "${v}"`))
  }

  test("an install prints the version of package.json beside install.sh", () => {
    const w = world()
    const r = runInstaller(w, [])
    expect(r.code).toBe(0)
    expect(r.stdout).toContain(`install.sh: opencode-guards ${version} from ${w.src}\n`)
  })

  test("the version is read from package.json, not a copy: another version there is the one printed", () => {
    const w = world()
    setVersion(w, "9.8.7")
    expect(runInstaller(w, []).stdout).toContain(`install.sh: opencode-guards 9.8.7 from ${w.src}\n`)
  })

  test("without package.json the install goes on and says the version is unknown", () => {
    const w = world()
    fs.rmSync(path.join(w.src, "package.json"))
    const r = runInstaller(w, [])
    expect(r.code).toBe(0)
    expect(r.stdout).toContain(
      `install.sh: opencode-guards (version unknown: no package.json in ${w.src}) from ${w.src}`,
    )
    expect(fs.existsSync(path.join(w.plugins, "loop-guard.ts"))).toBe(true)
  })

  test("--check says the installed files are this checkout's version, or that they differ from it", () => {
    const w = world()
    runInstaller(w, [])
    // No opencode on PATH: --check stops after the installer's own checks (exit 5), which include the version line.
    const same = runInstaller(w, ["--check", "--only", "loop-guard"])
    expect(same.code).toBe(5)
    expect(same.stdout).toContain(
      `installed version: opencode-guards ${version} (the installed files are this checkout's)\n`,
    )
    fs.writeFileSync(path.join(w.src, "loop-guard.ts"), "// loop-guard placeholder v2\n")
    setVersion(w, "9.8.7")
    const other = runInstaller(w, ["--check"])
    expect(other.stdout).toContain(
      "installed version: not this checkout's opencode-guards 9.8.7 (these files differ from it: loop-guard.ts); ./install.sh installs this version\n",
    )
    runInstaller(w, [])
    expect(runInstaller(w, ["--check"]).stdout).toContain(
      "installed version: opencode-guards 9.8.7 (the installed files are this checkout's)\n",
    )
  }, 60_000)
})

describe("--example-config", () => {
  test("writes a commented example next to the plugins dir when there is none", () => {
    const w = world()
    const r = runInstaller(w, ["--example-config"])
    expect(r.code).toBe(0)
    const file = path.join(w.xdg, "opencode", "opencode-semantic-anchors.yaml")
    const text = read(file)
    expect(text.split("\n")[0]).toBe("# yaml-language-server: $schema=./plugins/opencode-semantic-anchors.schema.json")
    // Everything but the version line is a comment or blank: the file changes no behaviour until edited.
    const active = text.split("\n").filter((l) => l.trim() && !l.trim().startsWith("#"))
    expect(active).toEqual(["version: 1"])
    expect(text).toContain("#   - id: no-force-push")
    expect(r.stdout).toContain(`wrote an example ${file}`)
  })

  test("never overwrites an existing file, and --uninstall leaves it", () => {
    const w = world()
    const file = path.join(w.xdg, "opencode", "opencode-semantic-anchors.yaml")
    fs.mkdirSync(path.dirname(file), { recursive: true })
    fs.writeFileSync(file, "version: 1\ncontracts: []\n")
    const r = runInstaller(w, ["--example-config"])
    expect(r.code).toBe(0)
    expect(r.stdout).toContain(`kept your ${file}`)
    expect(read(file)).toBe("version: 1\ncontracts: []\n")
    const u = runInstaller(w, ["--uninstall"])
    expect(u.code).toBe(0)
    expect(read(file)).toBe("version: 1\ncontracts: []\n")
  })

  test("no contract file is created without it", () => {
    const w = world()
    runInstaller(w, [])
    expect(fs.readdirSync(path.join(w.xdg, "opencode"))).toEqual(["plugins"])
  })

  test("outside the default config dir it says how to point semantic-anchors at the file", () => {
    const w = world()
    const r = runInstaller(w, ["--example-config", "--dir", path.join(w.root, "elsewhere")])
    expect(r.code).toBe(0)
    expect(r.stdout).toContain(
      `OPENCODE_SEMANTIC_ANCHORS_CONFIG=${path.join(w.root, "elsewhere", "opencode-semantic-anchors.yaml")}`,
    )
  })
})

describe("usage", () => {
  test("--help documents every option, the supported versions and every exit code", () => {
    const w = world()
    const r = runInstaller(w, ["--help"])
    expect(r.code).toBe(0)
    for (const opt of [
      "--only",
      "--dir",
      "--dry-run",
      "--force",
      "--uninstall",
      "--example-config",
      "--check",
      "--project",
      "--contracts-only",
      "--opencode",
    ])
      expect(r.stdout).toContain(opt)
    expect(r.stdout).toContain(`Tested opencode versions (the end-to-end suite passed on each): ${RANGE}`)
    for (const code of [0, 1, 2, 3, 4, 5, 6]) expect(r.stdout).toMatch(new RegExp(`^  ${code}  \\S`, "m"))
  })

  test.each([
    [["--bogus"], "unknown option '--bogus'"],
    [["--only", "other"], "--only takes loop-guard or semantic-anchors"],
    [["--only"], "--only needs a value"],
    [["--dir"], "--dir needs a value"],
    [["--check", "--dry-run"], "drop --dry-run"],
    [["--uninstall", "--example-config"], "--example-config goes with an install"],
    [["--project", "."], "--project and --contracts-only go with --check"],
    [["--contracts-only"], "--project and --contracts-only go with --check"],
    [["--check", "--project"], "--project needs a value"],
    [["--check", "--project", "no-such-dir"], "--project no-such-dir is not a directory"],
    [["--check", "--contracts-only", "--only", "loop-guard"], "drop --only loop-guard"],
  ])("%p is a usage error (exit 2) that says what to do", (args, message) => {
    const w = world()
    const before = snapshot(w.root)
    const r = runInstaller(w, args)
    expect(r.code).toBe(2)
    expect(r.stderr).toContain(message)
    expect(snapshot(w.root)).toEqual(before)
  })
})

// --check, part 1: the person's contract files, read by the real semantic-anchors.ts on the Bun inside the real
// opencode (or bun), in a sandbox HOME. --contracts-only skips the doctor, as a project's CI would run it.
describe("--check: the contract files", () => {
  const withRealOpencode = (w: World) => ({ PATH: `${path.dirname(realOpencode)}:${w.env.PATH}` })
  const PROJECT_FILE = ".opencode/opencode-semantic-anchors.yaml"
  const GLOBAL_LABEL = "~/.config/opencode/opencode-semantic-anchors.yaml"
  const GOOD = `version: 1
contracts:
  - id: no-force-push
    description: Never rewrite shared history.
    mode: block
    trigger: { type: tool, tools: [bash], args: { command: { regex: 'push\\s+--force' } } }
`
  const BROKEN = `version: 1
contracts:
  - id: deploy-ticket
    description: Deploys need a ticket.
    mdoe: warn
    mode: block
    trigger: { type: tool, tools: [bash], args: { command: { regex: 'deploy (' } } }
  - id: fine
    description: Still loads.
    mode: info
    trigger: { type: tool, tools: [edit] }
`
  const BROKEN_LINES = [
    `warning: ${PROJECT_FILE}: contracts[0].mdoe: unknown key "mdoe" (did you mean "mode"?); it is ignored`,
    `error: ${PROJECT_FILE}: contracts[0].trigger.args.command.regex: invalid regular expression (missing ))`,
    "contract files: 1 error, 1 warning",
  ]
  /** A world with the real plugin (a copy of the repository), HOME as home, and a project directory. */
  function contractWorld(files: { global?: string; project?: string } = {}) {
    const w = world("repo")
    // HOME's default config dir, as most people have it: XDG_CONFIG_HOME unset
    w.env.XDG_CONFIG_HOME = ""
    const project = path.join(w.root, "project")
    fs.mkdirSync(path.join(project, ".opencode"), { recursive: true })
    if (files.project !== undefined) fs.writeFileSync(path.join(project, PROJECT_FILE), files.project)
    if (files.global !== undefined) {
      fs.mkdirSync(path.join(w.home, ".config", "opencode"), { recursive: true })
      fs.writeFileSync(path.join(w.home, ".config", "opencode", "opencode-semantic-anchors.yaml"), files.global)
    }
    return { w, project }
  }
  const header = (project: string, w: World) =>
    `install.sh --check: contract files for ${project}, read by semantic-anchors.ts of this checkout (none is installed in ${path.join(w.home, ".config", "opencode", "plugins")}), on the Bun inside ${realOpencode}`

  test("good files: every file and its status, no problem, exit 0; nothing written", () => {
    const { w, project } = contractWorld({ global: GOOD, project: GOOD.replace("no-force-push", "no-push-main") })
    const before = snapshot(w.root)
    const r = runInstaller(w, ["--check", "--contracts-only"], { env: withRealOpencode(w), cwd: project })
    expect(r.stdout.split("\n")).toEqual([
      header(project, w),
      "built-ins: 11 contracts, 12 presets",
      `${GLOBAL_LABEL}: loaded, 1 new contract`,
      `${PROJECT_FILE}: loaded, 1 new contract`,
      "contract files: 0 errors, 0 warnings",
      "",
    ])
    expect(r.stderr).toBe("")
    expect(r.code).toBe(0)
    expect(snapshot(w.root)).toEqual(before)
  })

  test("a broken project file: each problem as the log has it (file, key path, fix), exit 6", () => {
    const { w, project } = contractWorld({ project: BROKEN })
    const r = runInstaller(w, ["--check", "--contracts-only"], { env: withRealOpencode(w), cwd: project })
    expect(r.stdout.split("\n")).toEqual([
      header(project, w),
      "built-ins: 11 contracts, 12 presets",
      `${GLOBAL_LABEL}: not found`,
      `${PROJECT_FILE}: loaded, 1 new contract`,
      ...BROKEN_LINES,
      "",
    ])
    expect(r.code).toBe(6)
  })

  test("examples are run: one that does not do what it says is an error with its key path, exit 6", () => {
    const withExamples = (passes: string) =>
      GOOD +
      `    examples:\n      fires: [{ tool: bash, args: { command: "git push --force origin main" } }]\n      passes: [{ tool: bash, args: { command: "${passes}" } }]\n`
    const good = contractWorld({ project: withExamples("git push origin main") })
    const ok = runInstaller(good.w, ["--check", "--contracts-only"], {
      env: withRealOpencode(good.w),
      cwd: good.project,
    })
    expect(ok.stdout).toContain(`${PROJECT_FILE}: loaded, 1 new contract\ncontract files: 0 errors, 0 warnings\n`)
    expect(ok.code).toBe(0)
    const { w, project } = contractWorld({ project: withExamples("git push  --force origin main") })
    const r = runInstaller(w, ["--check", "--contracts-only"], { env: withRealOpencode(w), cwd: project })
    expect(r.stdout).toContain(
      `error: ${PROJECT_FILE}: contracts[0].examples.passes[0]: listed under passes, but the contract fires: `,
    )
    expect(r.stdout).toContain("contract files: 1 error, 0 warnings\n")
    expect(r.code).toBe(6)
  })

  test("warnings alone are printed and do not fail: exit 0", () => {
    const { w, project } = contractWorld({ project: GOOD.replace("    mode: block", "    mode: block\n    mdoe: x") })
    const r = runInstaller(w, ["--check", "--contracts-only"], { env: withRealOpencode(w), cwd: project })
    expect(r.stdout).toContain(
      `warning: ${PROJECT_FILE}: contracts[0].mdoe: unknown key "mdoe" (did you mean "mode"?); it is ignored\ncontract files: 0 errors, 1 warning\n`,
    )
    expect(r.code).toBe(0)
  })

  test("--project DIR checks that project's file from anywhere; the global file's YAML error too", () => {
    const { w, project } = contractWorld({ global: "version: 1\ncontracts: [\n", project: BROKEN })
    const r = runInstaller(w, ["--check", "--contracts-only", "--project", project], {
      env: withRealOpencode(w),
      cwd: w.tmp,
    })
    expect(r.stdout).toContain(`${PROJECT_FILE}: loaded, 1 new contract\n`)
    expect(r.stdout).toContain(`${GLOBAL_LABEL}: ignored\n`)
    expect(r.stdout).toMatch(
      new RegExp(
        `^error: ${GLOBAL_LABEL.replace(/[.]/g, "\\.")}: cannot parse YAML \\(.+\\); the file is ignored and the other files stay in force$`,
        "m",
      ),
    )
    expect(r.stdout).toContain("contract files: 2 errors, 1 warning\n")
    expect(r.code).toBe(6)
    // the current directory, when it has no contract file, is checked by default: nothing wrong there
    const here = runInstaller(w, ["--check", "--contracts-only"], { env: withRealOpencode(w), cwd: w.tmp })
    expect(here.stdout).toContain(`install.sh --check: contract files for ${w.tmp}, read by`)
    expect(here.stdout).toContain(`${PROJECT_FILE}: not found\n`)
  })

  test("OPENCODE_SEMANTIC_ANCHORS_CONFIG: the file it names is the global file; a missing one is an error", () => {
    const { w, project } = contractWorld({ global: BROKEN })
    const team = path.join(w.root, "team", "anchors.yaml")
    fs.mkdirSync(path.dirname(team), { recursive: true })
    fs.writeFileSync(team, GOOD)
    const env = { ...withRealOpencode(w), OPENCODE_SEMANTIC_ANCHORS_CONFIG: team }
    const r = runInstaller(w, ["--check", "--contracts-only", "--project", project], { env })
    expect(r.stdout).toContain(`${team}: loaded, 1 new contract\n`)
    expect(r.stdout).not.toContain(GLOBAL_LABEL) // the env var replaces the default global file
    expect(r.code).toBe(0)
    const missing = path.join(w.root, "team", "gone.yaml")
    const gone = runInstaller(w, ["--check", "--contracts-only", "--project", project], {
      env: { ...env, OPENCODE_SEMANTIC_ANCHORS_CONFIG: missing },
    })
    expect(gone.stdout).toContain(
      `error: ${missing}: cannot read the file (ENOENT: OPENCODE_SEMANTIC_ANCHORS_CONFIG names a file that does not exist); it is ignored and the other files stay in force\n`,
    )
    expect(gone.code).toBe(6)
  })

  test("the installed semantic-anchors.ts is the one that reads them; one that cannot is a failed check (exit 5)", () => {
    const { w, project } = contractWorld({ project: BROKEN })
    expect(runInstaller(w, ["--only", "semantic-anchors"], { env: withRealOpencode(w) }).code).toBe(0)
    const plugins = path.join(w.home, ".config", "opencode", "plugins")
    const r = runInstaller(w, ["--check", "--contracts-only"], { env: withRealOpencode(w), cwd: project })
    expect(r.stdout).toStartWith(
      `install.sh --check: contract files for ${project}, read by semantic-anchors.ts installed in ${plugins}, on the Bun inside ${realOpencode}\n`,
    )
    expect(r.code).toBe(6)
    fs.writeFileSync(
      path.join(plugins, "semantic-anchors.ts"),
      "export default { id: 'semantic-anchors', server: async () => ({}) }\n",
    )
    const old = runInstaller(w, ["--check", "--contracts-only"], { env: withRealOpencode(w), cwd: project })
    expect(old.stdout).toContain(
      `contract files: not checked: ${path.join(plugins, "semantic-anchors.ts")} exports no loadConfig and resolvePaths: not a semantic-anchors.ts this check can read; reinstall it with ./install.sh\n`,
    )
    expect(old.stdout).toContain("contract files: failed: not checked (the line above says why)\n")
    expect(old.code).toBe(5)
  })

  test("without opencode, bun on PATH reads them; with neither, a failed check that says what to install", () => {
    const { w, project } = contractWorld({ project: BROKEN })
    fs.symlinkSync(path.join(repo, "node_modules", ".bin", "bun"), path.join(w.bin, "bun"))
    const r = runInstaller(w, ["--check", "--contracts-only"], { cwd: project })
    expect(r.stdout).toContain(`, on ${path.join(w.bin, "bun")}\n`)
    expect(r.stdout).toContain(BROKEN_LINES.join("\n"))
    expect(r.code).toBe(6)
    fs.rmSync(path.join(w.bin, "bun"))
    const none = runInstaller(w, ["--check", "--contracts-only"], {
      cwd: project,
      env: { PATH: `${w.bin}:/usr/bin:/bin` },
    })
    expect(none.stdout).toContain(
      `contract files: failed: they are read on Bun, and neither opencode nor bun was found; install opencode (npm i -g opencode-ai@${VERSIONS.pinned}) or pass --opencode PATH\n`,
    )
    expect(none.code).toBe(5)
  })

  test("an opencode that does not run scripts (BUN_BE_BUN ignored) is not taken for Bun: the check says so", () => {
    const { w, project } = contractWorld({ project: GOOD })
    const stub = stubOpencode(w.bin, "Error: Failed to change directory")
    const r = runInstaller(w, ["--check", "--contracts-only", "--opencode", stub], {
      cwd: project,
      env: { PATH: `${w.bin}:/usr/bin:/bin` },
    })
    expect(r.stdout).toContain(
      "contract files: failed: the check did not run (opencode: Error: Failed to change directory)\n",
    )
    expect(r.code).toBe(5)
  })

  test("without --contracts-only the doctor runs after them: its checks pass, and the contract error still exits 6", () => {
    const { w, project } = contractWorld({ project: BROKEN })
    expect(runInstaller(w, [], { env: withRealOpencode(w) }).code).toBe(0)
    const r = runInstaller(w, ["--check", "--project", project], { env: withRealOpencode(w), timeoutMs: 180_000 })
    expect(r.stdout).toContain(BROKEN_LINES.join("\n"))
    expect(r.stdout).toContain("install.sh --check: doctor for the plugins in")
    expect(r.stdout).toMatch(/^\d+ ok, 0 failed$/m)
    expect(r.stdout).toContain(
      "but a contract file has an error (listed at the top): that contract or file is skipped when opencode starts.\n",
    )
    expect(r.code).toBe(6)
  }, 180_000)
})

describe("--check (doctor) on the real opencode of the dev toolchain", () => {
  const withRealOpencode = (w: World) => ({ PATH: `${path.dirname(realOpencode)}:${w.env.PATH}` })
  const CHECK_TIMEOUT = 180_000

  test(
    "a copy of the repository without test/ and bench/ installs, and every check is ok: exit 0, the user's dirs untouched",
    () => {
      const w = world("repo")
      expect(fs.existsSync(path.join(w.src, "test"))).toBe(false)
      expect(fs.existsSync(path.join(w.src, "bench"))).toBe(false)
      expect(fs.existsSync(path.join(w.src, "node_modules"))).toBe(false)
      expect(runInstaller(w, [], { env: withRealOpencode(w) }).code).toBe(0)
      const before = snapshot(w.root)
      const r = runInstaller(w, ["--check"], { env: withRealOpencode(w), timeoutMs: CHECK_TIMEOUT })
      expect(r.out).toContain(`opencode: ok (${realOpencode}, version ${VERSIONS.pinned})`)
      expect(r.out).toContain(`opencode version: ok (${VERSIONS.pinned}: in the tested range ${RANGE})`)
      expect(r.out).toContain("installed loop-guard.ts: ok (matches the manifest)")
      const hasAnchors = fs.existsSync(path.join(w.src, "semantic-anchors.ts"))
      expect(r.out).toContain(
        `plugins discovered (opencode debug config): ok (loop-guard.ts${hasAnchors ? " semantic-anchors.ts" : ""})`,
      )
      expect(r.out).toContain(
        'loop-guard blocks the 4th identical read: ok (reads 1-3 ran, the 4th was blocked and the model read: "loop-guard blocked this read call',
      )
      if (hasAnchors) expect(r.out).toContain("semantic-anchors blocks a contract: ok (the probe command was blocked")
      expect(r.out).toContain(`plugins loaded (opencode's log): ok (no 'failed to load plugin' for loop-guard.ts`)
      expect(r.out).not.toContain("failed:")
      expect(r.out).toMatch(/^\d+ ok, 0 failed$/m)
      expect(r.out).toContain("the installed plugins load and block in this opencode. Restart opencode")
      expect(r.out).not.toContain("not yet tested")
      expect(r.code).toBe(0)
      // The doctor read the installed files and wrote nothing outside its sandbox, which it removed.
      expect(snapshot(w.root)).toEqual(before)
    },
    CHECK_TIMEOUT,
  )

  test(
    "a plugin that never blocks and one that fails to load: each check fails with its reason, exit 5, sandbox kept",
    () => {
      const inert = `export default { id: "semantic-anchors", server: async () => ({}) }\n`
      const throwing = `export default { id: "loop-guard", server: async () => { throw new Error("boom at init") } }\n`
      const w = world({ "loop-guard.ts": throwing, "semantic-anchors.ts": inert })
      expect(runInstaller(w, [], { env: withRealOpencode(w) }).code).toBe(0)
      const r = runInstaller(w, ["--check"], { env: withRealOpencode(w), timeoutMs: CHECK_TIMEOUT })
      expect(r.out).toContain("plugins discovered (opencode debug config): ok (loop-guard.ts semantic-anchors.ts)")
      expect(r.out).toContain(
        "loop-guard blocks the 4th identical read: failed: the 4th identical read ran (status completed): loop-guard did not block it",
      )
      expect(r.out).toContain(
        "semantic-anchors blocks a contract: failed: the probe command ran (status completed): the contract did not block it",
      )
      expect(r.out).toContain(
        `plugins loaded (opencode's log): failed: opencode logged 'failed to load plugin' for loop-guard.ts: "boom at init"`,
      )
      // and the contract check before the doctor cannot read contract files with a semantic-anchors.ts like that
      expect(r.out).toContain("contract files: failed: not checked (the line above says why)")
      expect(r.out).toMatch(/^\d+ ok, 4 failed$/m)
      expect(r.code).toBe(5)
      const kept = /the sandbox is kept for a look: (\S+)/.exec(r.out)?.[1]
      expect(kept?.startsWith(path.join(w.tmp, "opencode-guards-check."))).toBe(true)
      expect(fs.existsSync(path.join(kept!, "run.jsonl"))).toBe(true)
    },
    CHECK_TIMEOUT,
  )

  test("no opencode on PATH: failed with what to do, exit 5", () => {
    const w = world()
    runInstaller(w, [])
    const r = runInstaller(w, ["--check"])
    expect(r.code).toBe(5)
    expect(r.out).toContain(
      `opencode: failed: not found on PATH; install opencode ${RANGE} (npm i -g opencode-ai@${VERSIONS.pinned}), or pass --opencode PATH`,
    )
  })

  test("nothing installed: failed with what to do, exit 5", () => {
    const w = world()
    const r = runInstaller(w, ["--check", "--opencode", realOpencode], { timeoutMs: 60_000 })
    expect(r.code).toBe(5)
    expect(r.out).toContain("plugins installed: failed: no plugin file in")
    expect(r.out).toContain("run ./install.sh first")
  }, 60_000)

  test.each([
    [belowRange, `older than ${VERSIONS.oldest}, the oldest tested version`],
    [majorAbove, "another major version"],
  ])("a refused opencode version (%s) is a failed check that says why", (version, why) => {
    const w = world()
    runInstaller(w, [])
    const stub = stubOpencode(w.bin, version)
    const r = runInstaller(w, ["--check", "--opencode", stub])
    expect(r.out).toContain(`opencode version: failed: ${version}: ${why}`)
    expect(r.out).toContain("install.sh refuses it without --force")
    expect(r.code).toBe(5)
  })

  test(
    "a newer, untested version that passes: the check says it is not yet tested, and the pass says this run is the proof",
    () => {
      // The real opencode behind a wrapper that reports a newer version: what a user meets the day after a release.
      const w = world("repo")
      const newer = patchOf(VERSIONS.newest, 1)
      const wrapper = path.join(w.bin, "opencode")
      fs.writeFileSync(
        wrapper,
        `#!/bin/sh\nif [ "$1" = --version ]; then echo ${newer}; exit 0; fi\nexec '${realOpencode}' "$@"\n`,
      )
      fs.chmodSync(wrapper, 0o755)
      const install = runInstaller(w, [])
      expect(install.code).toBe(0)
      expect(install.stderr).toContain(`opencode ${newer} (${wrapper}) is newer than ${VERSIONS.newest}`)
      const r = runInstaller(w, ["--check"], { timeoutMs: CHECK_TIMEOUT })
      expect(r.out).toContain(
        `opencode version: ok (${newer}: newer than ${VERSIONS.newest}, the newest tested version: not yet tested; the checks below are the proof on this machine)`,
      )
      expect(r.out).toContain("loop-guard blocks the 4th identical read: ok")
      expect(r.out).toContain("semantic-anchors blocks a contract: ok")
      expect(r.out).toMatch(/^\d+ ok, 0 failed$/m)
      expect(r.out).toContain(
        `the installed plugins load and block in this opencode ${newer}, a version the end-to-end suite has not tested`,
      )
      expect(r.code).toBe(0)
    },
    CHECK_TIMEOUT,
  )
})

// --check on OpenCode 2: no v2 host is reachable here, so a stand-in opencode answers --version with the release the
// v2 entry follows, runs scripts on the real Bun (as opencode's BUN_BE_BUN=1 does: the contract check) and answers
// `plugin list` from the plugins it finds in the config dir it is given, each with the status the test asks for.
describe("--check on OpenCode 2", () => {
  const bun = path.join(repo, "node_modules", ".bin", "bun")
  function stubV2(dir: string, status: string): string {
    const file = path.join(dir, "opencode")
    const list = status
      ? `for f in "$OPENCODE_CONFIG_DIR"/plugins/*.ts; do n=$(basename "$f" .ts); echo "  $n  local  ${status}"; done`
      : "echo 'No plugins.'"
    fs.writeFileSync(
      file,
      `#!/bin/sh\nif [ "$BUN_BE_BUN" = 1 ]; then exec '${bun}' "$@"; fi\ncase "$1" in\n  --version) echo ${v2Release} ;;\n  plugin) ${list} ;;\n  *) exit 1 ;;\nesac\n`,
    )
    fs.chmodSync(file, 0o755)
    return file
  }

  test.each([
    [
      "lists both as loaded",
      "loaded",
      0,
      [
        "OpenCode 2 loads loop-guard.ts: ok (opencode plugin list: loop-guard  local  loaded)",
        "OpenCode 2 loads semantic-anchors.ts: ok",
      ],
    ],
    [
      "lists them as failed",
      "failed",
      5,
      ["OpenCode 2 loads semantic-anchors.ts: failed: opencode plugin list says: semantic-anchors  local  failed"],
    ],
    [
      "names neither",
      "",
      0,
      ["OpenCode 2 loads loop-guard.ts: not proven (`opencode plugin list` exited 0 and did not name it: No plugins.)"],
    ],
  ])(
    "the host %s",
    (_name, status, code, lines) => {
      const w = world("repo")
      stubV2(w.bin, status)
      expect(runInstaller(w, []).code).toBe(0)
      const r = runInstaller(w, ["--check"], { timeoutMs: 60_000 })
      expect(r.out).toContain(`opencode version: ok (${v2Release}: OpenCode 2: the plugins follow its plugin API`)
      expect(r.out).toContain("contract files: 0 errors, 0 warnings")
      for (const line of lines) expect(r.out).toContain(line)
      expect(r.out).toContain("not proven on OpenCode 2: that the plugins block in a real session")
      expect(r.code).toBe(code)
    },
    60_000,
  )
})

// --check on a real older release: the oldest version of the tested range, installed into the version matrix's cache
// (test/hosts.sh --install-only, outside the repository; downloaded once per machine). Skipped, saying why, when the
// range is the pinned version alone or the registry cannot be reached.
const olderRelease = (() => {
  if (VERSIONS.oldest === VERSIONS.pinned) return { skip: "the tested range is the pinned version alone" }
  const r = spawnSync("bash", [path.join(repo, "test", "hosts.sh"), "--install-only", VERSIONS.oldest], {
    encoding: "utf8",
    timeout: 900_000,
  })
  const bin = r.stdout.trim()
  if (r.status === 0 && bin && fs.existsSync(bin)) return { bin }
  return {
    skip: `could not install opencode-ai@${VERSIONS.oldest} into the cache: ${(r.stderr || r.error?.message || "").trim()}`,
  }
})()
if (olderRelease.skip) console.log(`skipped: --check on an older release: ${olderRelease.skip}`)

describe.skipIf(!olderRelease.bin)(`--check on the oldest tested release, opencode ${VERSIONS.oldest}`, () => {
  test("installs silently and every check is ok", () => {
    const w = world("repo")
    const env = { PATH: `${path.dirname(olderRelease.bin!)}:${w.env.PATH}` }
    const install = runInstaller(w, [], { env })
    expect(install.code).toBe(0)
    expect(install.stdout).toContain(
      `opencode ${VERSIONS.oldest} (${olderRelease.bin}): supported, in the tested range ${RANGE}`,
    )
    expect(install.stderr).toBe("")
    const r = runInstaller(w, ["--check"], { env, timeoutMs: 180_000 })
    expect(r.out).toContain(`opencode version: ok (${VERSIONS.oldest}: in the tested range ${RANGE})`)
    expect(r.out).toContain("loop-guard blocks the 4th identical read: ok")
    expect(r.out).toContain("semantic-anchors blocks a contract: ok")
    expect(r.out).toContain("plugins loaded (opencode's log): ok")
    expect(r.out).toMatch(/^\d+ ok, 0 failed$/m)
    expect(r.code).toBe(0)
  }, 180_000)
})

// The YAML that install.sh writes must be what semantic-anchors accepts: checked with the plugin's own validator.
describe.skipIf(!fs.existsSync(path.join(repo, "semantic-anchors.ts")))(
  "YAML written by install.sh, through semantic-anchors' validator",
  () => {
    const validate = async (text: string) => {
      const anchors = await import(path.join(repo, "semantic-anchors.ts"))
      const config = anchors.buildConfig([
        { path: "/x/opencode-semantic-anchors.yaml", label: "example", layer: "global", text },
      ])
      return {
        problems: config.problems.map(anchors.formatProblem),
        contracts: [...config.contracts.keys()] as string[],
      }
    }
    const example = () => {
      const w = world()
      runInstaller(w, ["--example-config"])
      return read(path.join(w.xdg, "opencode", "opencode-semantic-anchors.yaml"))
    }

    test("the example as written: valid, and it adds no contract", async () => {
      const { problems, contracts } = await validate(example())
      const builtins = (await validate("version: 1\n")).contracts
      expect(problems).toEqual([])
      expect(contracts).toEqual(builtins)
    })

    test("the example with every commented line switched on: valid, and it adds no-force-push", async () => {
      const lines = example().split("\n")
      const start = lines.indexOf("version: 1")
      const uncommented = lines.map((l, i) => (i > start && l.startsWith("#") ? l.replace(/^# ?/, "") : l)).join("\n")
      const { problems, contracts } = await validate(uncommented)
      expect(problems).toEqual([])
      expect(contracts).toContain("no-force-push")
    })

    test("the --check probe contract: valid", async () => {
      const { PROBE_CONTRACT: probe } = await import("../doctor/check.mjs")
      expect(probe).toBeDefined()
      const { problems, contracts } = await validate(probe)
      expect(problems).toEqual([])
      expect(contracts).toContain("doctor-probe")
    })
  },
)

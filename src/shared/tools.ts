/**
 * opencode's tools by what they do to the project, one list for both plugins (`EDIT_TOOLS`, `READING_TOOLS`).
 */
// The bash tool is neither: the bash reader judges each command. Any tool in neither list (an MCP tool, a plugin's
// tool, `task`) may change something. Each plugin says what it does with `task`, the one tool they read apart:
// semantic-anchors counts a subagent's own calls for its root session, so the `task` call itself is no changing
// step; loop-guard asks only whether anything changed between two reads, and a subagent may have edited files.

/** Tools that write files by their arguments (`filePath`, `edits`, a patch). */
export const EDIT_TOOLS = ["edit", "write", "patch", "multiedit", "apply_patch"]

/** Tools that only read or look: opencode's own, and Claude Code's `bashoutput` poll. */
export const READING_TOOLS = [
  "read",
  "grep",
  "glob",
  "list",
  "webfetch",
  "websearch",
  "codesearch",
  "todoread",
  "todowrite",
  "bashoutput",
  "skill",
  "lsp",
  "question",
]

// semantic-anchors.ts: opencode's log lines. opencode prints no service name for a plugin's line, so each message
// starts with `semantic-anchors: ` (a person greps for it) and says the plugin, what happened and each contract once.
import { describe, expect, test } from "bun:test"
import { PROJECT_FILE, edit, start } from "./fixtures/semantic-anchors/harness"

const S = "ses_log"

const PROJECT = `version: 1
contracts:
  - id: no-force-push
    description: Never rewrite shared history.
    mode: block
    trigger: { type: tool, tools: [bash], args: { command: { regex: 'push\\s+--force' } } }
  - id: lint-hint
    description: Lint after edits.
    message: Run the linter after edits.
    mode: info
    trigger: { type: tool, tools: [edit] }
  - id: mdoe-typo
    mdoe: block
    description: A typo'd key, so that a config problem is logged.
    mode: warn
    trigger: { type: tool, tools: [write] }
`

describe("log lines", () => {
  test("each says the plugin, what happened and the contract once, with the level as opencode's own field", async () => {
    const h = await start({ project: PROJECT })
    await h.user(S, "refactor the whole module and rename every function in it please")
    await h.tool(S, "bash", { command: "git push --force-with-lease origin main" })
    await h.run(S, "edit", edit(1))
    await h.run(S, "write", { filePath: "src/b.ts", content: "" })
    await h.command(S, "bypass the force-push is agreed")
    await h.tool(S, "bash", { command: "git push --force-with-lease origin main" })
    const lines = h.logs.map((l) => [l.level, l.message.replace(h.dirs.globalFile, "<global>")])
    const guidance = "Say the goal and how the result can be verified (e.g. 'so that ...', 'done when the tests pass')."
    const mdoe = `${PROJECT_FILE}: contracts[2].mdoe: unknown key "mdoe" (did you mean "mode"?); it is ignored`
    for (const line of [
      ["warn", `semantic-anchors: ${mdoe}`],
      [
        "info",
        `semantic-anchors: loaded: built-ins (11 contracts, 12 presets); <global> (not found); ${PROJECT_FILE} (loaded, 3 new contracts)`,
      ],
      ["info", `semantic-anchors: tip on a user message: ${guidance} (intent-anchor)`],
      ["warn", "semantic-anchors: blocked a bash call: Never rewrite shared history (no-force-push)"],
      ["warn", "semantic-anchors: noted to the agent on an edit call: Write only on a cited source (source-anchor)"],
      ["info", "semantic-anchors: tip on an edit call: Run the linter after edits. (lint-hint)"],
      [
        "warn",
        "semantic-anchors: noted to the agent on a write call: Write only on a cited source (source-anchor); A typo'd key, so that a config problem is logged (mdoe-typo)",
      ],
      ["info", "semantic-anchors: bypass granted (/anchor bypass by the user), override 1/3: the force-push is agreed"],
      ["info", "semantic-anchors: bypass used: a bash call blocked by no-force-push ran once"],
    ])
      expect(lines).toContainEqual(line)
    for (const [, message] of lines) {
      expect(message).toStartWith("semantic-anchors: ")
      expect(message.split("semantic-anchors:").length).toBe(2) // the plugin's name once
      for (const id of ["no-force-push", "lint-hint", "source-anchor", "intent-anchor", "mdoe-typo"])
        expect({ message, times: message.split(`(${id})`).length - 1 }).toEqual({
          message,
          times: message.includes(`(${id})`) ? 1 : 0,
        })
    }
  })
})

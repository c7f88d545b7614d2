// The default protection beside cc-safety-net, command by command (docs/contracts.md, "Differences from
// cc-safety-net"). Every row of the protection table (test/fixtures/semantic-anchors/protection-rows.ts: each
// destructive form and each near miss) goes through this plugin with no config, as the table test sends it, and
// through cc-safety-net's own `checkCommand` with the project as its working directory. Prints the counts of
// agreement and every row where the two decide differently, for the docs to give each one its reason.
//
// cc-safety-net is not a dependency: fetch it once and name its folder.
//   cd /tmp && npm pack cc-safety-net@2.4.5 && tar xzf cc-safety-net-2.4.5.tgz
//   bun bench/vs-safety-net.ts /tmp/package
import { existsSync } from "node:fs"
import path from "node:path"
import { PROTECTION_IDS } from "../semantic-anchors"
import { start } from "../test/fixtures/semantic-anchors/harness"
import { ROWS } from "../test/fixtures/semantic-anchors/protection-rows"
import { printColumns } from "./lib.ts"

type Check = (input: { command: string; cwd: string }) => { kind: "allow" } | { kind: "deny"; ruleId?: string }

const dir = process.argv[2]
const api = dir && path.resolve(dir, "dist/api.js")
if (!api || !existsSync(api)) {
  console.error("usage: bun bench/vs-safety-net.ts DIR (cc-safety-net's unpacked package; how to fetch it: the header)")
  process.exit(2)
}
const { checkCommand } = (await import(api)) as { checkCommand: Check }
const version = (await import(path.resolve(dir, "package.json"))).version as string

const h = await start()
let session = 0
const rows: string[][] = []
const counts = { both: 0, neither: 0, onlyHere: 0, onlyThere: 0 }
for (const [, command] of ROWS) {
  const message = await h.tool(`ses_vs${++session}`, "bash", { command })
  const here = message === undefined ? "runs" : (PROTECTION_IDS.find((id) => message.includes(`"${id}"`)) ?? "blocked")
  const answer = checkCommand({ command, cwd: h.dirs.project })
  const there = answer.kind === "allow" ? "runs" : `blocked ${answer.ruleId ?? ""}`.trim()
  const blockedHere = here !== "runs"
  const blockedThere = answer.kind === "deny"
  if (blockedHere && blockedThere) counts.both++
  else if (!blockedHere && !blockedThere) counts.neither++
  else {
    counts[blockedHere ? "onlyHere" : "onlyThere"]++
    rows.push([command.replace(/\n/g, "\\n"), here, there])
  }
}

console.log(`protection table: ${ROWS.length} commands; cc-safety-net ${version}`)
console.log(`both block ${counts.both}, both run ${counts.neither}`)
console.log(`blocked here only ${counts.onlyHere}, blocked by cc-safety-net only ${counts.onlyThere}\n`)
printColumns(["command", "here", "cc-safety-net"], rows)

// protect-secrets: what taking the person's secrets out of a tool result costs (docs/performance.md, "protect-secrets").
//
// A project and a home hold a realistic set of secret files (a `.env` of 24 entries, half of them secrets, a private
// key in ~/.ssh, ~/.aws/credentials, ~/.npmrc) and the process has 5 secret variables. Two plugin instances over the
// same files, one with protect-secrets on (no config) and one with it off (`enabled: false`), get the same
// tool.execute.after calls, in turn, with results that hold no secret: real outputs (the `obs` of the trajectories in
// DIR, their first and last 150 characters each, joined until the size is reached), at 1 KB, 10 KB, 100 KB and 1 MB.
// Prints the median time of the hook for each, the difference per KB of output (the target: at most 5 us per KB),
// and the time of one reading of the secret files (in the background, at start and at each user message).
//   bun bench/secrets.ts [DIR]   (default ../shared/data/real-traces)
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { now, printColumns, summarize } from "./lib.ts"
import { startAnchors } from "./semantic-anchors.ts"
import { loadTraces } from "./traces.ts"

const dir = process.argv[2] ?? join(import.meta.dir, "..", "..", "shared", "data", "real-traces")
const root = mkdtempSync(join(tmpdir(), "secrets-bench-"))
const project = join(root, "project")
const home = join(root, "home")
const xdg = join(root, "xdg")
const token = (n: number) => `tk${n}${Math.random().toString(36).slice(2)}${Math.random().toString(36).slice(2)}`
const file = (path: string, text: string) => {
  mkdirSync(join(path, ".."), { recursive: true })
  writeFileSync(path, text)
}
const env: string[] = []
for (let i = 0; i < 12; i++) env.push(`SERVICE_${i}_API_KEY=${token(i)}`, `SERVICE_${i}_PORT=${3000 + i}`)
file(join(project, ".env"), env.join("\n"))
file(join(project, ".opencode", "x"), "")
const key = Array.from({ length: 26 }, (_, i) => `${token(100 + i)}${"A".repeat(64)}`.slice(0, 64)).join("\n")
file(
  join(home, ".ssh", "id_ed25519"),
  `-----BEGIN OPENSSH PRIVATE KEY-----\n${key}\n-----END OPENSSH PRIVATE KEY-----\n`,
)
file(
  join(home, ".aws", "credentials"),
  `[default]\naws_access_key_id = AKIA${token(200)}\naws_secret_access_key = ${token(201)}\n`,
)
file(join(home, ".npmrc"), `//registry.npmjs.org/:_authToken=npm_${token(300)}\n`)
for (let i = 0; i < 5; i++) process.env[`BENCH_SECRET_${i}_TOKEN`] = token(400 + i)
const offFile = join(root, "off.yaml")
writeFileSync(offFile, "version: 1\ncontracts:\n  - id: protect-secrets\n    enabled: false\n")

const on = await startAnchors({ home, xdg, project })
const off = await startAnchors({ home, xdg, project, configFile: offFile })
const say = (hooks: any) =>
  hooks["chat.message"]({ sessionID: "ses_b" }, { message: { agent: "build" }, parts: [{ type: "text", text: "go" }] })
await say(on)
await say(off)
await new Promise((resolve) => setTimeout(resolve, 500))

// real outputs, joined
const pieces: string[] = []
for (const trace of loadTraces(dir))
  for (const trajectory of trace.trajectories)
    for (const turn of trajectory.turns) for (const call of turn) if (call.obs) pieces.push(call.obs)
const real = pieces.join("\n")
const textOf = (kb: number) => {
  let text = real
  while (text.length < kb * 1024) text += real
  return text.slice(0, kb * 1024)
}

let calls = 0
async function after(hooks: any, output: string): Promise<number> {
  const out = { title: "", output, metadata: {} }
  const t = now()
  await hooks["tool.execute.after"](
    { tool: "bash", sessionID: "ses_b", callID: `c${++calls}`, args: { command: "x" } },
    out,
  )
  const spent = now() - t
  if (out.output !== output) throw new Error("a result with no secret was changed")
  return spent
}

const rows: string[][] = []
for (const [kb, rounds] of [
  [1, 3000],
  [10, 600],
  [100, 120],
  [1024, 16],
] as const) {
  const text = textOf(kb)
  const times = { on: [] as number[], off: [] as number[] }
  for (let r = 0; r < rounds + 3; r++) {
    const a = await after(on, text)
    const b = await after(off, text)
    if (r >= 3) (times.on.push(a), times.off.push(b)) // the first rounds warm up
  }
  const mOn = summarize(times.on).median / 1000
  const mOff = summarize(times.off).median / 1000
  rows.push([`${kb} KB`, `${mOff.toFixed(1)} us`, `${mOn.toFixed(1)} us`, `${((mOn - mOff) / kb).toFixed(2)} us`])
}

console.log(`protect-secrets: tool.execute.after on real outputs with no secret (${pieces.length} outputs of ${dir})`)
console.log("secrets known: 12 .env values, 26 private-key lines, 3 home credentials, 5 environment variables\n")
printColumns(["result", "family off (median)", "family on (median)", "cost per KB"], rows)

// one reading of the secret files, as at each user message (in the background)
const readings: number[] = []
const reader = await startAnchors({ home, xdg, project })
for (let i = 0; i < 20; i++) {
  const t = now()
  await say(reader)
  readings.push(now() - t)
}
console.log(
  `\nchat.message, which starts the reading and does not wait for it: median ${(summarize(readings).median / 1000).toFixed(1)} us`,
)
for (let i = 0; i < 5; i++) delete process.env[`BENCH_SECRET_${i}_TOKEN`]
rmSync(root, { recursive: true, force: true })

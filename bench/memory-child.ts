// One memory scenario in a fresh process, so the heap holds nothing but what it measures. Prints one JSON line.
// Usage: bun bench/memory-child.ts loop-guard <checkpoints,...> | semantic-anchors typical|worst <checkpoints,...>
import * as loopGuard from "./loop-guard.ts"
import * as semanticAnchors from "./semantic-anchors.ts"

const [which, a, b] = process.argv.slice(2)
const list = (text: string | undefined) => (text ? text.split(",").filter(Boolean).map(Number) : [])
const result =
  which === "loop-guard"
    ? await loopGuard.memoryScenario(list(a))
    : await semanticAnchors.memoryScenario(a === "worst" ? "worst" : "typical", list(b))
console.log(JSON.stringify(result))

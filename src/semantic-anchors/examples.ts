/**
 * A contract's examples judged with the engine (`exampleEnv`, `checkExamples`): before the validator, which checks
 * them at every load.
 */
import { SCHEMA_KEYS, type Contract, type Example } from "./model"
import type { Paths, EngineEnv } from "./types"
import { Reporter, join } from "./problems"
import { guardFiles } from "./integrity"
import { newState, recordSeen } from "./sessions"
import { checkMessageContract, checkToolContract } from "./verdicts"

/** Where examples are judged: the project's paths, and no file-system access (an example is a call on paper). */
export function exampleEnv(paths: Paths): EngineEnv {
  return {
    paths,
    guard: guardFiles(paths),
    match: { directory: paths.directory, worktree: paths.worktree },
    realpath: (abs) => abs,
  }
}

/**
 * Whether every example of a contract does what it says; each one that does not is an error at its key path
 * (`contracts[2].examples.passes[0]`) saying what the contract did instead, followed by `outcome`.
 */
export function checkExamples(
  contract: Contract,
  keyPath: string,
  outcome: string,
  env: EngineEnv,
  r: Reporter,
): boolean {
  const errorsBefore = r.errors
  for (const listed of SCHEMA_KEYS.examples) {
    contract.examples?.[listed].forEach((example, i) => {
      const where = join(join(keyPath, listed), i)
      let judged: ReturnType<typeof judgeExample>
      try {
        judged = judgeExample(contract, example, env)
      } catch (error) {
        // An engine failure on an odd example must not take the rest of the file down with it.
        judged = `could not be judged (${(error as Error)?.message ?? error})`
      }
      if (typeof judged === "string") r.error(where, `${judged}; ${outcome}`)
      else if (judged.fires !== (listed === "fires"))
        r.error(
          where,
          judged.fires
            ? `listed under passes, but the contract fires: ${judged.why.join("; ")}; ${outcome}`
            : `listed under fires, but the contract lets it pass: ${judged.why.join("; ")}; ${outcome}`,
        )
    })
  }
  return r.errors === errorsBefore
}

/** One example judged by the same checks as a real call, in a fresh session; a string when it is the wrong kind. */
function judgeExample(
  contract: Contract,
  example: Example,
  env: EngineEnv,
): { fires: boolean; why: string[] } | string {
  const trigger = contract.trigger
  const why: string[] = []
  if ("message" in example) {
    if (trigger.type !== "message")
      return `is a user message, but a ${trigger.type} trigger is judged on tool calls: write it as { tool: ..., args: {...} }`
    return { fires: checkMessageContract(contract, example.message, why), why }
  }
  if (trigger.type === "message")
    return `is a tool call, but a message trigger is judged on user messages: write it as { message: "..." }`
  const state = newState("")
  if (example.steps) state.steps.set(contract.id, example.steps)
  if (example.seen !== undefined && trigger.type === "tool" && trigger.unlessSeen)
    recordSeen(state, example.seen, [trigger.unlessSeen])
  const fires = checkToolContract(contract, example.tool, example.args, state, env, why) !== undefined
  return { fires, why }
}

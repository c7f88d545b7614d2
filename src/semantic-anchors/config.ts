/**
 * The configuration built from file contents, no I/O: layers merged by id, built-ins' examples judged once
 * (`buildConfig`, `resolvePaths`).
 */
import { ROLES, type Contract, builtinContracts, BUILTIN_PRESETS, type RoleView, copyView, type Config } from "./model"
import { protectionContracts } from "./protection"
import { DEFAULT_MAX_OVERRIDES, Bun, CONFIG_FILE_NAME } from "./constants"
import { normalizePath, resolvePath } from "./names"
import type { Paths, Problem, EngineEnv } from "./types"
import { Reporter, join } from "./problems"
import { checkExamples, exampleEnv } from "./examples"
import { applyFile, type FileLayer } from "./validator"
import { duplicateKeys } from "./yaml-keys"

/** Parses YAML text (JSON is YAML too) and applies it; a parse error skips the file. */
function applyText(config: Config, text: string, file: string, layer: FileLayer, env: EngineEnv): string {
  let raw: unknown
  try {
    raw = Bun.YAML.parse(text)
  } catch (error) {
    const reason = String((error as Error).message ?? error).replace(/^YAML Parse error:\s*/, "")
    config.problems.push({
      severity: "error",
      file,
      keyPath: "",
      text: `cannot parse YAML (${reason}); the file is ignored and the other files stay in force`,
    })
    return "ignored"
  }
  const status = applyFile(config, raw, file, layer, env)
  if (status !== "ignored") {
    for (const dup of duplicateKeys(text)) {
      config.problems.push({
        severity: "warning",
        file,
        keyPath: dup.keyPath,
        text: `key "${dup.key}" is written twice in one mapping (lines ${dup.firstLine} and ${dup.line}); YAML keeps only the last one, so line ${dup.firstLine} has no effect. Delete one of them`,
      })
    }
  }
  return status
}

/** Collects the distinct `unlessSeen` patterns so each seen text is tested once per pattern, not once per call. */
function finishConfig(config: Config): Config {
  const patterns = new Map<string, RegExp>()
  for (const contract of config.contracts.values()) {
    if (contract.trigger.type === "tool" && contract.trigger.unlessSeen) {
      const regex = contract.trigger.unlessSeen
      patterns.set(`${regex.source}/${regex.flags}`, regex)
    }
  }
  config.seenPatterns = [...patterns.values()]
  return config
}

export type FileRead = { path: string; label: string; layer: FileLayer; text?: string; error?: string }

/**
 * The built-ins' examples judged (a test keeps them passing; a problem here would name the built-in). They are the
 * same contracts at every load, so they are judged once per process, in a stand-in layout (a project at
 * /srv/project, a home at /home/user): judged in the person's own layout, an example such as `find ~ -exec rm` would
 * fail where the home lies inside the project, and the person would read an error about a built-in they never wrote.
 */
const BUILTIN_EXAMPLE_PATHS = { directory: "/srv/project", worktree: "/srv/project" }
const BUILTIN_EXAMPLE_ENV = { HOME: "/home/user", TMPDIR: "/tmp" }
let builtinExamplesJudged: readonly Problem[] | undefined
function builtinExampleProblems(config: Config): readonly Problem[] {
  if (!builtinExamplesJudged) {
    const found: Problem[] = []
    const builtins = new Reporter("built-ins", found)
    const env = exampleEnv(resolvePaths(BUILTIN_EXAMPLE_PATHS, BUILTIN_EXAMPLE_ENV))
    for (const contract of config.contracts.values())
      if (contract.examples) checkExamples(contract, join(contract.id, "examples"), "it stays in force", env, builtins)
    builtinExamplesJudged = found
  }
  return builtinExamplesJudged
}

/** The configuration with no file: the built-ins (the six anchors, then the default protection), presets and roles. */
export function defaultConfig(): Config {
  const contracts = new Map<string, Contract>()
  for (const contract of [...builtinContracts(), ...protectionContracts()]) contracts.set(contract.id, contract)
  const presets = new Map<string, string[]>()
  for (const role of ROLES) presets.set(role, [...BUILTIN_PRESETS[role].contracts])
  const view: RoleView = {
    defaultRole: "software-developer",
    agents: new Map([
      ["build", "software-developer"],
      ["plan", "software-architect"],
    ]),
    presets,
  }
  return {
    settings: { maxOverrides: DEFAULT_MAX_OVERRIDES, confirmPattern: null, secretFiles: [], notSecrets: [] },
    ...view,
    globalView: copyView(view),
    contracts,
    seenPatterns: [],
    problems: [],
    files: [{ label: "built-ins", status: `${contracts.size} contracts, ${presets.size} presets` }],
  }
}

/**
 * Builds the configuration from file contents already read (no I/O here, so it is fast and testable). `paths` is
 * where the examples are judged (a relative path in an example is inside this project); default: a project at `/`.
 */
export function buildConfig(reads: FileRead[], paths: Paths = resolvePaths({}, {})): Config {
  const config = defaultConfig()
  const env = exampleEnv(paths)
  config.problems.push(...builtinExampleProblems(config))
  for (const read of reads) {
    if (read.text !== undefined) {
      config.files.push({ label: read.label, status: applyText(config, read.text, read.label, read.layer, env) })
    } else if (read.error === "ENOENT") {
      config.files.push({ label: read.label, status: "not found" })
    } else {
      config.problems.push({
        severity: "error",
        file: read.label,
        keyPath: "",
        text: `cannot read the file (${read.error}); it is ignored and the other files stay in force`,
      })
      config.files.push({ label: read.label, status: "unreadable" })
    }
  }
  return finishConfig(config)
}

/** Resolves every path from the plugin input and the environment at server() time (never process.cwd()). */
export function resolvePaths(
  input: { directory?: string; worktree?: string },
  env: Record<string, string | undefined>,
): Paths {
  const home = env.HOME || "/"
  const directory = normalizePath(input.directory || input.worktree || home)
  const worktree = normalizePath(input.worktree || directory)
  const globalDir = normalizePath(`${env.XDG_CONFIG_HOME || `${home}/.config`}/opencode`)
  const fromEnv = env.OPENCODE_SEMANTIC_ANCHORS_CONFIG
  return {
    directory,
    worktree,
    home,
    tmpdir: normalizePath(env.TMPDIR || "/tmp"),
    dataDir: normalizePath(`${env.XDG_DATA_HOME || `${home}/.local/share`}/opencode`),
    globalDir,
    globalFile: fromEnv ? resolvePath(directory, fromEnv, home) : `${globalDir}/${CONFIG_FILE_NAME}`,
    globalFromEnv: Boolean(fromEnv),
    projectFile: `${directory}/.opencode/${CONFIG_FILE_NAME}`,
  }
}

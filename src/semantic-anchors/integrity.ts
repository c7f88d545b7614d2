/**
 * Guard-integrity: the guard's own files, what an edit writes, whether a bash command touches them (`guardFiles`,
 * `bashTouchesGuard`).
 */
import { substitutionsIn } from "../shared/bash-scan"
import { programName, readCommand, readCommandAt } from "../shared/bash-programs"
import { CONFIG_FILE_NAME } from "./constants"
import { braceGlob, braceWords, escapeRegex, globToRegExp, resolvePath, isInside } from "./names"
import type { Paths, GuardFiles, RealPath } from "./types"
import { isMapping } from "./problems"
import type { Target } from "../shared/bash-words"

/** The files an edit-tool call writes: `filePath`, or the paths named in a patch text. */
export function editTargets(args: unknown): string[] {
  if (!isMapping(args)) return []
  const targets: string[] = []
  for (const key of ["filePath", "file_path", "path"])
    if (typeof args[key] === "string") targets.push(args[key] as string)
  for (const key of ["patchText", "patch", "input"]) {
    const text = args[key]
    if (typeof text !== "string") continue
    for (const match of text.matchAll(/^\*\*\* (?:(?:Add|Update|Delete) File|Move to): (.+)$/gm))
      targets.push(match[1].trim())
    for (const match of text.matchAll(/^(?:\+\+\+|---) (?:[ab]\/)?(.+)$/gm))
      if (match[1].trim() !== "/dev/null") targets.push(match[1].trim())
  }
  return targets
}

/** The files install.sh installs into a plugins directory. */
const PLUGIN_FILES = ["semantic-anchors.ts", "loop-guard.ts", "opencode-semantic-anchors.schema.json"]

export function guardFiles(paths: Paths): GuardFiles {
  const projectDir = `${paths.directory}/.opencode`
  const exact = new Set<string>([
    paths.globalFile,
    `${paths.globalDir}/${CONFIG_FILE_NAME}`,
    `${paths.globalDir}/opencode-semantic-anchors.yml`,
    paths.projectFile,
    `${projectDir}/opencode-semantic-anchors.yml`,
    ...[paths.directory, projectDir, paths.globalDir].flatMap((dir) => [
      `${dir}/opencode.json`,
      `${dir}/opencode.jsonc`,
    ]),
  ])
  // Directories whose removal or move takes guard files with them.
  const roots = [
    projectDir,
    paths.globalDir,
    `${projectDir}/plugin`,
    `${projectDir}/plugins`,
    `${paths.globalDir}/plugin`,
    `${paths.globalDir}/plugins`,
  ]
  // The plugins install.sh puts there: every file in a plugins directory is a guard file (isGuardPath), but a find
  // name test or a glob is judged on known paths only, so these stand for them (`find / -name '*.ts' -delete`).
  for (const dir of roots.slice(2)) for (const name of PLUGIN_FILES) exact.add(`${dir}/${name}`)
  const mentions = [
    ".opencode",
    "opencode/plugin",
    "opencode-semantic-anchors",
    ".config/opencode",
    "XDG_CONFIG_HOME",
    "opencode.json",
    "semantic-anchors.ts",
    paths.globalDir,
  ]
  if (paths.globalFromEnv) {
    mentions.push(paths.globalFile)
    const base = paths.globalFile.split("/").pop()
    if (base) mentions.push(base)
  }
  const mentioned = new RegExp(mentions.filter(Boolean).map(escapeRegex).join("|") || "(?!)")
  return { exact, roots, mentions, mentioned }
}

const PLUGIN_DIR_FILE = /(?:^|\/)\.?opencode\/plugins?\/[^/]+/
const CONFIG_BASENAME = /(?:^|\/)opencode-semantic-anchors\.(?:ya?ml|json)$/

export function isGuardPath(abs: string, guard: GuardFiles): boolean {
  return guard.exact.has(abs) || CONFIG_BASENAME.test(abs) || PLUGIN_DIR_FILE.test(abs)
}

/** "/a/b/c" -> ["/a/b/c", "/a/b", "/a"]: a glob that matches a parent directory takes the file with it. */
function ancestorsAndSelf(abs: string): string[] {
  const out = [abs]
  for (let cut = abs.lastIndexOf("/"); cut > 0; cut = abs.lastIndexOf("/", cut - 1)) out.push(abs.slice(0, cut))
  return out
}

/**
 * The guard's files and directories with every parent directory (a glob or a find root reaching one takes them),
 * made once per guard: looked up for every path a bash command writes, searched for a glob or a find root.
 */
const withParentsCache = new WeakMap<GuardFiles, Set<string>>()
function guardPathsAndParents(guard: GuardFiles): Set<string> {
  let paths = withParentsCache.get(guard)
  if (!paths) withParentsCache.set(guard, (paths = new Set([...guard.exact, ...guard.roots].flatMap(ancestorsAndSelf))))
  return paths
}

/** Whether any of the guard's paths or their parents holds `test`. */
function someGuardPath(guard: GuardFiles, test: (path: string) => boolean): boolean {
  for (const path of guardPathsAndParents(guard)) if (test(path)) return true
  return false
}

/** Whether a normal absolute path is a guard file or directory, or a directory with one under it (the root too). */
function holdsGuardPath(path: string, guard: GuardFiles): boolean {
  const normal = path.length > 1 && path.endsWith("/") ? path.replace(/\/+$/, "") : path
  return path === "/" || guardPathsAndParents(guard).has(normal)
}

/**
 * A shell word's glob with each run of wildcards made one, without the splits a backtracking RegExp tries for a run
 * (`rm /************Q` held the host for 5-20 s). As the shell reads it, a `*` never crosses a `/`: a run inside a
 * path component is one `*` (`***` -> `*`, `*?*` -> `?*`); a component that is only wildcards with a `**` in it is
 * `**`, taken as crossing directories (bash does with globstar; the guard assumes it may be on), and repeated
 * `**\/` are one.
 */
function collapseWildcards(glob: string): string {
  return glob.replace(/(?:\*\*\/)+/g, "**/").replace(/[*?]*\*[*?]*/g, (run: string, at: number, word: string) => {
    const wholeComponent = (at === 0 || word[at - 1] === "/") && (word[at + run.length] ?? "/") === "/"
    return wholeComponent && run.includes("**") ? "**" : `${"?".repeat(run.split("?").length - 1)}*`
  })
}

/** Whether writing `target` (a file, a directory and all under it, a glob, a find root with its tests) reaches a
 * guard file or directory. */
function targetHitsGuard(target: Target, paths: Paths, guard: GuardFiles, realpath: RealPath): boolean {
  const expanded = hereExpanded(target.word, paths.directory).replace(/^\$\{?HOME\}?(?=\/|$)/, "~")
  const named = resolvePath(paths.directory, expanded, paths.home)
  // A bracket expression matches one character (`.[o]pencode`, `.[[:lower:]]pencode`): here, any one character; a
  // brace sequence (`.{o..o}pencode`) any text.
  const bracketed = named.includes("[") ? named.replace(/\[[!^]?\]?(?:\[:[a-z]+:\]|[^\]/])*\]/g, "?") : named
  const abs = bracketed.includes("{") ? bracketed.replace(/(^|[^$])\{[^{}/]*\.\.[^{}/]*\}/g, "$1*") : bracketed
  if (/[*?]/.test(abs)) {
    const pattern = globToRegExp(collapseWildcards(abs), true)
    return someGuardPath(guard, (path) => pattern.test(path))
  }
  const filter = target.filter
  if (filter) {
    // The path as find prints it: the root as written, then the rest.
    const printed = (path: string) =>
      path === abs ? target.word : `${target.word.replace(/\/+$/, "")}/${path.slice(abs.length).replace(/^\/+/, "")}`
    return someGuardPath(guard, (path) => isInside(path, abs) && filter(printed(path)))
  }
  const hits = (path: string) =>
    isGuardPath(path, guard) || (holdsGuardPath(path, guard) && !(target.into && onlyInto(path, target.into, guard)))
  return hits(abs) || (target.throughLinks && hits(realpath(abs)))
}

/**
 * Whether writing into `dir`, a directory that holds guard files (the project, the config dir's parent), leaves them
 * alone: it is none of the guard's own directories, and no source lands on one of them under its own name (`cp -r
 * backup/.opencode $P/` does). What an unknown source holds is not looked at: `rsync -a src/ $P/` and `cp -r src/.
 * $P` copy into the project as any build does.
 */
function onlyInto(dir: string, sources: readonly string[], guard: GuardFiles): boolean {
  if (guard.roots.includes(dir) || dir === "/") return false
  for (const source of sources) {
    const name = programName(source.replace(/\/+$/, ""))
    if (name === "" || name === "." || name === ".." || /[*?[{$`]/.test(name)) continue // its contents: see above
    const landed = `${dir}/${name}`
    if (isGuardPath(landed, guard) || holdsGuardPath(landed, guard)) return false
  }
  return true
}

/** `$PWD`, `${PWD}`, `$(pwd)` and `` `pwd` `` in a word: the directory the command runs in. */
const PWD_WORD = /\$\{?PWD\}?(?![A-Za-z0-9_])|\$\(\s*pwd(?:\s+-[LP])?\s*\)|`\s*pwd(?:\s+-[LP])?\s*`/g
function hereExpanded(word: string, directory: string): string {
  return word.includes("PWD") || word.includes("pwd") ? word.replace(PWD_WORD, () => directory) : word
}

/** The directory a command runs in after the line's `cd`s (readCommandAt's `cwd`), from `directory`. */
function cdInto(directory: string, cwd: readonly string[] | undefined, home: string): string {
  if (!cwd) return directory
  let here = directory
  for (const dir of cwd) here = resolvePath(here, hereExpanded(dir, here).replace(/^\$\{?HOME\}?(?=\/|$)/, "~"), home)
  return here
}

/** The paths a command line may print: what find selects, the files other programs read. */
function listedPaths(command: string): Target[] {
  return readCommandAt(command, 1).readings.flatMap(
    (one) => one.lists ?? one.reads.map((word) => ({ word, throughLinks: false })),
  )
}

/**
 * Does a bash command change a guard file? A heuristic against accidents and casual evasion (quoting, `../`,
 * globs, deleting a parent directory, a link with an innocent name), not a sandbox: a determined shell user can
 * always hide a path (a variable, `$(...)`, an encoded name). It blocks when
 * - a file the command writes (an operand PROGRAMS calls written, a redirect target) is a guard file or directory,
 *   a parent of one, or a glob over either, or names one (`.opencode`, the config dir, ...); redirect targets and
 *   the operands of programs that write through links are resolved with `realpath` first;
 * - the command changes something and a file it reads names one (`cp .opencode/x.yaml /tmp`, `cd .opencode && rm *`);
 * - the command runs code the reader does not follow (an unknown program, an interpreter, `$(...)`) and names one
 *   anywhere.
 * Scripts and patterns it reads (sed, grep, awk) are never taken for paths.
 */
export function bashTouchesGuard(
  command: string,
  paths: Paths,
  guard: GuardFiles,
  realpath: RealPath = (abs) => abs,
  workdir?: string,
): string | undefined {
  const read = readCommand(command)
  // opencode runs the command in the bash tool's `workdir` (its prompt says to use it instead of `cd`): relative
  // paths resolve there, and the directory is read like `cd DIR`: a guard name in it, or a guard directory (or a
  // directory inside one), counts when the command changes something or cannot be followed.
  const here = workdir ? { ...paths, directory: resolvePath(paths.directory, workdir, paths.home) } : paths
  if (workdir && (read.changing || read.opaque)) {
    const inGuardDir = [...guard.roots].some((root) => isInside(here.directory, root))
    const hit = mentionIn(workdir, guard) ?? (inGuardDir ? workdir : undefined)
    if (hit) return hit
  }
  if (read.opaque && quotedMentions(guard).test(command)) {
    // Quotes and backslashes taken out, so `.open''code` names `.opencode`; a command without them is read as it is.
    const hit = mentionIn(command.replace(/\\\n/g, " ").replace(/["'\\]/g, ""), guard)
    if (hit) return hit
  }
  const targets: Target[] = []
  const cds: (readonly string[] | undefined)[] = [] // each target's line `cd`s (`cd .. && rm -rf app`)
  for (let r = 0; r < read.readings.length; r++)
    for (const target of read.readings[r].writes) {
      if (read.cwds?.[r]) cds[targets.length] = read.cwds[r]
      targets.push(target)
    }
  for (const word of read.redirects) targets.push({ word, throughLinks: true })
  // A written word made by `$(...)` (`sed -i ... $(grep -rl x .)`): the paths its command reads or lists are written.
  const written = targets.length
  for (let t = 0; t < written; t++)
    if (/\$\(|`/.test(targets[t].word))
      for (const listed of substitutionsIn(targets[t].word).flatMap(listedPaths)) {
        if (cds[t]) cds[targets.length] = cds[t]
        targets.push(listed)
      }
  for (let t = 0; t < targets.length; t++) {
    const target = targets[t]
    const where = cds[t] ? { ...here, directory: cdInto(here.directory, cds[t], here.home) } : here
    for (const word of braceWords(target.word) ?? [braceGlob(target.word)]) {
      const one = word === target.word ? target : { ...target, word }
      const hit = mentionIn(word, guard) ?? (targetHitsGuard(one, where, guard, realpath) ? word : undefined)
      if (hit) return hit
    }
  }
  if (read.changing) {
    for (const one of read.readings)
      for (const read of one.reads) {
        const words = braceWords(read)
        // a word too big to expand: its glob, as a written path would be (the names alone cannot be told)
        if (!words && targetHitsGuard({ word: braceGlob(read), throughLinks: false }, here, guard, realpath))
          return read
        for (const word of words ?? []) {
          const hit = mentionIn(word, guard)
          if (hit) return hit
        }
      }
  }
  return undefined
}

/**
 * The guard's names with quotes and backslashes allowed between their characters (`.open''code`): a test on the raw
 * command line that holds whenever the line with them taken out would name one, without making that line. Made on
 * the first bash call that needs it, not at every load.
 */
const quotedMentionsCache = new WeakMap<GuardFiles, RegExp>()
function quotedMentions(guard: GuardFiles): RegExp {
  let regex = quotedMentionsCache.get(guard)
  if (!regex) {
    const quotable = (name: string) => [...name].map(escapeRegex).join(`["'\\\\]*`)
    regex = new RegExp(guard.mentions.filter(Boolean).map(quotable).join("|") || "(?!)")
    quotedMentionsCache.set(guard, regex)
  }
  return regex
}

/** The first of the guard's names (`.opencode`, the config dir, ...) that a text contains. */
function mentionIn(text: string, guard: GuardFiles): string | undefined {
  if (!guard.mentioned.test(text)) return undefined
  for (const mention of guard.mentions) if (mention && text.includes(mention)) return mention
  return undefined
}

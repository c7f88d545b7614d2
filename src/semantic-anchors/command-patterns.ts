/**
 * Command rules (`runs:`): a pattern parsed, matched against the commands a call would run, code it cannot follow
 * that names it, why none matched (`parseCommandPattern`, `matchRan`, `FLAG_NAMES`, `FLAG_VALUES`, `runsMissWhy`).
 */
import type { EngineEnv, CommandPattern, FlagSpelling, PathPlaces, PatternFlag, PatternOperand } from "./types"
import { relativeInside, braceWords, escapeRegex, globToRegExp, oneLine, resolvePath } from "./names"
import { REGEX_INPUT_CAP, capText } from "../shared/text"
import { isMapping } from "./problems"
import { NO_WORDS, scanCommand } from "../shared/bash-scan"
import { getopt, type OptionSpec } from "../shared/bash-words"
import { gitSubcommandAt } from "../shared/git-words"
import {
  PROGRAM_READERS,
  programName,
  ranArgs,
  readCommand,
  type CommandReading,
  type RanCommand,
  type RanIndex,
} from "../shared/bash-programs"

// A tool trigger's `runs: ["git push --force", "git push +*"]` fires when any simple command the bash call would run
// (readCommand's `ran`: chains, subshells, `$(...)`, `bash -c`/`eval`, after wrappers and `VAR=x`) is that program
// with that subcommand, all those flags and an operand for each operand glob. A pattern is written as it is typed:
//   - the first word is the program, by name (`git` matches `/usr/bin/git`); `{git,hub}` is any of them;
//   - then its subcommand words (`push`, `delete`; `{commit,merge}` any of them), found after the program's own
//     options (`git -C dir -c k=v push`, `kubectl -n prod delete`), npm's read as npm does (`npm pub` is publish:
//     NPM_COMMANDS); programs the reader knows to take no subcommand (rm, chmod, ...) have none;
//   - flags are read as the program parses them: any order, `-rf` = `-r -f`, `--opt=value`, the options before the
//     subcommand too (not git's); where FLAG_NAMES knows a program, a flag's spellings are one flag (`git push -f` =
//     `--force`, `rm -r` = `-R` = `--recursive`); rm's and git's long options by unique prefix (LONG_OPTIONS);
//     `!--dry-run` says the flag must be absent; `{-f,--force-with-lease}` is any of them;
//   - operands are globs (`+*` a `+refspec`, `*` anything); one that starts with `/`, `~`, `$HOME`, `$PROJECT` or
//     `$TMPDIR` is a path glob (`**` spans directories) matched against the operand resolved from the project
//     directory (`../x` is outside it); `!glob` leaves out the operands it matches (`!/tmp/**`); find's `{}` (in
//     `find ROOT... -exec CMD {} +`) stands for each root and what lies under it (foundOperands).
// Text is never a command: an echo's arguments, a grep pattern, a commit message, a here-document fed to cat. Code
// the reader cannot follow (`python3 -c`, `ssh host '...'`, an unknown program) fires when it names the pattern's
// words (program, subcommand, a spelling of each flag): it may run them, and the contract says so. A message it
// sends (gh's --body, curl's --data: MESSAGE_OPTIONS) is text, left out of what it names.

/** Programs that run the command after their options: a pattern names that command, and matches it behind them. */
const SEEN_THROUGH = new Set(
  "sudo nice nohup time exec timeout stdbuf setsid ionice watch xargs env command busybox".split(" "),
)

/** A subcommand word of a pattern: `push`, `rollout`, `dist-tag`; a flag, an operand glob or a path is none. */
const SUBCOMMAND_WORD = /^[A-Za-z][\w.:-]*$/

/** Programs the reader knows that take no subcommand: every word after them is an option or an operand. */
const NO_SUBCOMMAND = new Set([...PROGRAM_READERS.keys()].filter((name) => name !== "git"))

/**
 * Flags with more than one spelling, per program or `program subcommand`: each short letter and its long name, the
 * long name the one flag. A flag not listed is itself (`--hard`).
 */
const FLAG_NAMES: Record<string, Record<string, string>> = {
  rm: { r: "recursive", R: "recursive", f: "force", i: "interactive", d: "dir", v: "verbose" },
  "git push": { f: "force", d: "delete", n: "dry-run", u: "set-upstream", q: "quiet", v: "verbose", o: "push-option" },
  "git clean": { f: "force", n: "dry-run", i: "interactive", q: "quiet", e: "exclude" },
  "git reset": { q: "quiet", p: "patch", N: "intent-to-add" },
  "git commit": { n: "no-verify", a: "all", m: "message", F: "file", q: "quiet", v: "verbose", s: "signoff" },
  "git merge": { n: "no-stat", m: "message", F: "file", q: "quiet", v: "verbose", s: "strategy", X: "strategy-option" },
  "git checkout": { f: "force", q: "quiet", p: "patch", m: "merge" },
  "git switch": { f: "force", q: "quiet", m: "merge", c: "create", C: "force-create", d: "detach", t: "track" },
  "git restore": { s: "source", S: "staged", W: "worktree", q: "quiet", p: "patch", m: "merge" },
  "git reflog": { n: "dry-run" },
  // -D and -M stay letters of their own: each is two options at once (--delete --force, --move --force)
  "git branch": { d: "delete", f: "force", m: "move", c: "copy", r: "remotes", a: "all", l: "list", q: "quiet" },
  "git worktree": { f: "force", q: "quiet", v: "verbose", n: "dry-run", b: "branch", B: "branch", d: "detach" },
  // npm's shorthands (`npm help config`): -d/-q/-s set the log level, -f is --force; --dry-run has no short form
  "npm publish": { w: "workspace", d: "loglevel", q: "loglevel", s: "loglevel", f: "force", g: "global" },
  "kubectl delete": {
    n: "namespace",
    l: "selector",
    f: "filename",
    k: "kustomize",
    A: "all-namespaces",
    R: "recursive",
    o: "output",
  },
}

/** Options that take the next word as their value, per program or `program subcommand` (so it is no operand). */
const FLAG_VALUES: Record<string, OptionSpec> = {
  "git push": { values: "o", long: ["repo", "receive-pack", "exec", "push-option", "recurse-submodules"] },
  "git clean": { values: "e", long: ["exclude"] },
  "git commit": {
    values: "mFCct",
    long: ["message", "file", "reuse-message", "reedit-message", "template", "author", "date", "fixup", "squash"],
  },
  "git merge": { values: "mFsX", long: ["message", "file", "strategy", "strategy-option", "into-name"] },
  "npm publish": { values: "w", long: ["tag", "access", "otp", "registry", "workspace", "loglevel"] },
  "kubectl delete": {
    values: "nlfko",
    long: [
      "namespace",
      "kustomize",
      "selector",
      "filename",
      "output",
      "grace-period",
      "context",
      "cascade",
      "timeout",
      "kubeconfig",
    ],
  },
}

const MAX_PATTERN_WORDS = 32 // words of one pattern; a longer one is an error (no command rule needs more)
const RAN_SHOWN = 120 // characters of a matched command shown in a verdict

/** Own keys only: a program named "constructor" must not find Object's. */
function own<V>(table: Record<string, V>, key: string): V | undefined {
  return Object.prototype.hasOwnProperty.call(table, key) ? table[key] : undefined
}

/**
 * Long options of programs that take any unique prefix of one as it (getopt_long, git's parse-options): rm's
 * (`rm --help`, GNU coreutils) and git's per subcommand (`git push --git-completion-helper`, git 2.39), for git with
 * their `--no-` forms: `rm --recur` is --recursive, `git push --force-w` --force-with-lease, `git reset --har` --hard,
 * `git commit --no-verif` --no-verify; an ambiguous prefix (`--no-ver`: --no-verbose or --no-verify) is an error, so
 * stays itself here.
 */
const LONG_OPTIONS: Record<string, string[]> = {
  rm: "force interactive one-file-system no-preserve-root preserve-root recursive dir verbose help version".split(" "),
  "git push": [
    ..."verbose quiet repo all mirror delete tags dry-run porcelain force force-with-lease force-if-includes".split(
      " ",
    ),
    ..."recurse-submodules thin receive-pack exec set-upstream progress prune no-verify follow-tags signed".split(" "),
    ..."atomic push-option ipv4 ipv6 verify".split(" "),
  ],
  "git commit": [
    ..."quiet verbose file author date message reedit-message reuse-message fixup squash reset-author".split(" "),
    ..."trailer signoff template edit cleanup status gpg-sign all include interactive patch only no-verify".split(" "),
    ..."dry-run short branch ahead-behind porcelain long null amend no-post-rewrite untracked-files".split(" "),
    ..."pathspec-from-file pathspec-file-nul allow-empty allow-empty-message verify post-rewrite".split(" "),
  ],
  "git reset": [
    ..."quiet no-refresh mixed soft hard merge keep recurse-submodules patch intent-to-add".split(" "),
    ..."pathspec-from-file pathspec-file-nul refresh".split(" "),
  ],
  "git clean": "quiet dry-run force interactive exclude".split(" "),
  // git branch's --force is hidden from its completion list; git worktree's are its subcommands' options together
  "git branch": [
    ..."verbose quiet track set-upstream-to unset-upstream color remotes contains no-contains abbrev all".split(" "),
    ..."delete move copy list show-current create-reflog edit-description merged no-merged column sort".split(" "),
    ..."points-at ignore-case recurse-submodules format force".split(" "),
  ],
  "git checkout": [
    ..."quiet progress detach track guess force merge conflict patch ignore-skip-worktree-bits ours theirs".split(" "),
    ..."ignore-other-worktrees overwrite-ignore recurse-submodules overlay pathspec-from-file pathspec-file-nul".split(
      " ",
    ),
    "orphan",
  ],
  "git switch": [
    ..."create force-create guess discard-changes quiet recurse-submodules progress merge conflict detach".split(" "),
    ..."track force orphan ignore-other-worktrees".split(" "),
  ],
  "git restore": [
    ..."source staged worktree ignore-unmerged overlay quiet recurse-submodules progress merge conflict".split(" "),
    ..."ours theirs patch ignore-skip-worktree-bits pathspec-from-file pathspec-file-nul".split(" "),
  ],
  // reflog's expire and delete together; update-ref's -d and -m have no long form
  "git reflog": "expire expire-unreachable rewrite updateref stale-fix dry-run verbose all single-worktree".split(" "),
  "git update-ref": "no-deref stdin create-reflog".split(" "),
  "git worktree": "force detach checkout lock reason orphan track guess-remote quiet dry-run verbose expire".split(" "),
  "git merge": [
    ..."stat summary log squash commit edit cleanup ff ff-only rerere-autoupdate verify-signatures strategy".split(" "),
    ..."strategy-option message file into-name verbose quiet abort quit continue allow-unrelated-histories".split(" "),
    ..."progress gpg-sign autostash overwrite-ignore signoff no-verify verify".split(" "),
  ],
}

/** A long option as its program reads it: the option a unique prefix stands for; the name itself otherwise. */
function longName(key: string, name: string): string {
  const known = own(LONG_OPTIONS, key)
  if (known === undefined || known.includes(name)) return name
  const negatable = key.startsWith("git ") // git's parse-options takes --no-X for X
  let found: string | undefined
  for (const option of known)
    for (const form of negatable ? [option, `no-${option}`] : [option])
      if (form.startsWith(name)) {
        if (found !== undefined && found !== form) return name // ambiguous: git refuses it
        found = form
      }
  return found ?? name
}

/** The one name of a flag under a program (`f` -> `force` for `git push`); the name itself when it has no other. */
export function flagName(key: string, name: string): string {
  const names = own(FLAG_NAMES, key)
  return (names && own(names, name)) ?? (name.length > 1 ? longName(key, name) : name)
}

/** The options a command was given, each by its one name under its program (flagName): `-f` and `--forc` are `force`. */
export function flagsGiven(key: string, options: ReadonlyMap<string, unknown>): Set<string> {
  return new Set([...options.keys()].map((name) => flagName(key, name)))
}

/** Every spelling of a flag under a program (`f` -> `--force`, `-f`), for code the reader cannot follow. */
function flagSpellings(key: string, name: string): string[] {
  const long = flagName(key, name)
  const spellings = [long.length > 1 ? `--${long}` : `-${long}`]
  for (const [letter, named] of Object.entries(own(FLAG_NAMES, key) ?? {}))
    if (named === long && letter !== long) spellings.push(`-${letter}`)
  return spellings
}

/** A word's alternatives: `{a,b}` expanded as bash does; the word itself when it has none. */
function alternatives(word: string): string[] {
  return braceWords(word) ?? [word]
}

/** A pattern operand that is a path: matched against the operand resolved from the project directory. */
const PATH_PATTERN = /^(?:\/|~|\$\{?(?:HOME|PROJECT|TMPDIR)\b)/

/** Where a word ends in code the reader cannot follow: a blank, a quote, a shell operator. */
const CODE_WORD_EDGE = `\\s'"\`;&|()`

/** A regex that holds when code names one of these words as a word (`git` in `os.system('git push')`). */
function namedWord(words: readonly string[], shortFlag = false): RegExp {
  const edge = `(?:^|[${CODE_WORD_EDGE}/=])`
  const end = `(?=$|[${CODE_WORD_EDGE}=])`
  const source = words
    .map((word) =>
      shortFlag && /^-[^-]$/.test(word)
        ? `-[A-Za-z]*${escapeRegex(word[1])}[A-Za-z]*` // a letter in a cluster: -fd names -f
        : escapeRegex(word),
    )
    .join("|")
  return new RegExp(`${edge}(?:${source})${end}`)
}

/** Whether a pattern word (or one of its `{...}` alternatives) is a flag: `-f`, `--force`; not `-` (stdin). */
function isFlagWord(word: string): boolean {
  return word.startsWith("-") && word !== "-"
}

/** The flags one pattern word asks for (`-rf` -> r and f; `--force`; `{-f,--force-with-lease}` one of two). */
function patternFlags(bare: string, absent: boolean): PatternFlag[] {
  const spelled = alternatives(bare)
  const spelling = (word: string): FlagSpelling => {
    if (!word.startsWith("--")) return { names: [...word.slice(1)] }
    const eq = word.indexOf("=")
    return eq < 0 ? { names: [word.slice(2)] } : { names: [word.slice(2, eq)], value: word.slice(eq + 1) }
  }
  if (spelled.length > 1 || bare.startsWith("--") || absent) return [{ any: spelled.map(spelling), absent }]
  return [...bare.slice(1)].map((letter) => ({ any: [{ names: [letter] }], absent: false }))
}

/**
 * A pattern read, or why it cannot be (empty, an unclosed quote, more than one command, no program): the text of
 * the problem, which the validator puts after the pattern's key path.
 */
export function parseCommandPattern(text: string): CommandPattern | string {
  if (text.trim() === "") return 'is empty; write the command as you would type it, e.g. "git push --force"'
  const scan = scanCommand(text)
  if (scan === null)
    return `has an unclosed quote (${JSON.stringify(text)}); close it, or drop it: a pattern's words are plain words`
  if (scan.substituted) return 'has a $(...) or backquotes; write the command itself, e.g. "git push --force"'
  const one = scan.commands[0]
  if (scan.commands.length !== 1 || one.words.length === 0 || one.redirects.length || one.heredocs.length)
    return `is not one command (${JSON.stringify(text)}); write each command as its own pattern in the list: any one matches`
  const words = one.words
  if (words.length > MAX_PATTERN_WORDS) return `has more than ${MAX_PATTERN_WORDS} words; shorten it`
  // `{--force` is no list of alternatives but a literal word no command has: the rule would never fire
  const unbalanced = words.find((word) => word.split("{").length !== word.split("}").length)
  if (unbalanced !== undefined)
    return `has unbalanced braces in ${JSON.stringify(unbalanced)}; write {a,b} with both braces: "{-f,--force-with-lease}" is any of them`
  const first = words[0]
  if (/^[-!]/.test(first) || /^[A-Za-z_][A-Za-z0-9_]*=/.test(first) || /[*?[]/.test(first))
    return `names no program: its first word ${JSON.stringify(first)} must be the program, as in "git push --force" or "rm -rf /"`
  const programs = alternatives(first).map(programName)
  const wrapper = programs.find((name) => SEEN_THROUGH.has(name))
  if (wrapper)
    return `starts with ${wrapper}, which is seen through: write the command it runs ("rm -rf /" also matches "${wrapper} rm -rf /")`
  const pattern: CommandPattern = { text, programs, subcommands: [], flags: [], operands: [], named: [], keys: [] }
  let k = 1
  if (!programs.some((name) => NO_SUBCOMMAND.has(name)))
    for (; k < words.length; k++) {
      const subs = alternatives(words[k]) // `git {push,fetch}`: any of these subcommands
      if (!subs.every((sub) => SUBCOMMAND_WORD.test(sub))) break
      pattern.subcommands.push(subs)
    }
  for (; k < words.length; k++) {
    const absent = words[k].startsWith("!")
    const bare = absent ? words[k].slice(1) : words[k]
    if (bare === "" || bare === "--")
      return `has a lone ${JSON.stringify(words[k])}; write "!--flag" (the flag must be absent) or "!glob" (such operands are left out)`
    // `{-f,--force-with-lease}`: any of these flags; `{main,dev}`: any of these operands; a mix is neither
    const globs = alternatives(bare)
    const flags = globs.filter(isFlagWord).length
    if (flags > 0 && flags < globs.length)
      return `mixes flags and operands in ${JSON.stringify(bare)}; a {...} is either flags ("{-f,--force-with-lease}") or operands ("{main,dev}"): write one pattern for each`
    if (flags > 0) pattern.flags.push(...patternFlags(bare, absent))
    else pattern.operands.push({ globs, path: globs.every((glob) => PATH_PATTERN.test(glob)), excluded: absent })
  }
  for (const program of programs)
    if (pattern.subcommands.length === 0) pattern.keys.push(program)
    else for (const sub of pattern.subcommands[0]) pattern.keys.push(`${program} ${sub}`)
  // What code the reader cannot follow must name: the program, its subcommands, a spelling of each flag.
  const key = patternKey(programs[0], pattern.subcommands[0]?.[0])
  pattern.named.push(namedWord(programs))
  for (const sub of pattern.subcommands) pattern.named.push(namedWord(sub))
  for (const flag of pattern.flags)
    if (!flag.absent)
      pattern.named.push(
        namedWord(
          flag.any.flatMap((s) => s.names.flatMap((name) => flagSpellings(key, name))),
          true,
        ),
      )
  return pattern
}

/** The key of FLAG_NAMES, FLAG_VALUES and LONG_OPTIONS for a program and its subcommand: `git push`, or `rm`. */
function patternKey(program: string, sub: string | undefined): string {
  if (sub === undefined) return program
  const key = `${program} ${sub}`
  return own(FLAG_NAMES, key) !== undefined || own(LONG_OPTIONS, key) !== undefined ? key : program
}

export function expandPlaces(word: string, places: PathPlaces): string {
  if (word === "~" || word.startsWith("~/")) return places.home + word.slice(1)
  // `~user`: another user's home, beside this one (`/home/dev` -> `/home/user`; `~root` is `/root`)
  const user = word[0] === "~" ? /^~([a-z_][a-z0-9_.-]*)(?=\/|$)/i.exec(word) : null
  if (user)
    return `${user[1] === "root" ? "" : places.home.replace(/\/[^/]*$/, "")}/${user[1]}${word.slice(user[0].length)}`
  // `${HOME:?}`, `${TMPDIR:-/tmp}` (a default, or an error, for an unset variable) are read as the variable's value
  return word.replace(
    /\$(?:\{(HOME|PROJECT|TMPDIR|PWD)(?::?[-?=][^}]*)?\}|(HOME|PROJECT|TMPDIR|PWD)\b)/g,
    (_, a, b) => {
      const name = a ?? b
      return name === "HOME"
        ? places.home
        : name === "TMPDIR"
          ? places.tmpdir
          : name === "PWD"
            ? places.directory
            : places.project
    },
  )
}

/** Whether an operand of the command matches one operand glob of the pattern. */
function operandMatches(
  operand: PatternOperand,
  word: string,
  placesOf: () => PathPlaces,
  cwd: readonly string[],
): boolean {
  if (!operand.path) return operand.globs.some((glob) => wordGlob(glob).test(word))
  const places = placesOf()
  const abs = resolveOperand(word, places, cwd)
  return operand.globs.some((glob) => globToRegExp(normalizeGlob(expandPlaces(glob, places))).test(abs))
}

/** An operand as an absolute path: from the project directory, through the line's `cd`s (`cd /etc && rm -rf *`). */
export function resolveOperand(word: string, places: PathPlaces, cwd: readonly string[]): string {
  let here = places.directory
  for (const dir of cwd) here = resolvePath(here, expandPlaces(dir, places))
  return resolvePath(here, expandPlaces(word, places))
}

/** A path glob with `//` and a trailing `/` taken out (`$PROJECT/**` with a project at `/`). */
function normalizeGlob(glob: string): string {
  const collapsed = glob.replace(/\/{2,}/g, "/")
  return collapsed.length > 1 && collapsed.endsWith("/") ? collapsed.slice(0, -1) : collapsed
}

/** An operand glob that is no path: `*` and `?` match any character, `/` too (`kubectl delete *` takes `pod/x`). */
function wordGlob(glob: string): RegExp {
  return globToRegExp(glob.replace(/\*+/g, "**"))
}

/**
 * npm's commands and aliases (npm 11, lib/utils/cmd-list.js). npm runs any unique prefix of one as it (`npm pub` is
 * `npm publish`, `npm unp` `npm unpublish`), an alias as the command it names (`npm i` is `npm install`).
 */
const NPM_COMMANDS = new Set([
  ..."access adduser approve-scripts audit bugs cache ci completion config dedupe deny-scripts".split(" "),
  ..."deprecate diff dist-tag docs doctor edit exec explain explore find-dupes fund get help".split(" "),
  ..."help-search init install install-ci-test install-scripts install-test link ll login logout".split(" "),
  ..."ls org outdated owner pack ping pkg prefix profile prune publish query rebuild repo".split(" "),
  ..."restart root run sbom search set shrinkwrap stage star stars start stop team test token".split(" "),
  ..."trust undeprecate uninstall unpublish unstar update version view whoami".split(" "),
])
const NPM_ALIASES = new Map(
  [
    ..."author:owner home:docs issues:bugs info:view show:view find:search add:install".split(" "),
    ..."unlink:uninstall remove:uninstall rm:uninstall r:uninstall un:uninstall rb:rebuild list:ls".split(" "),
    ..."ln:link create:init i:install it:install-test cit:install-ci-test u:update up:update".split(" "),
    ..."c:config s:search se:search tst:test t:test ddp:dedupe v:view run-script:run".split(" "),
    ..."clean-install:ci clean-install-test:install-ci-test x:exec why:explain la:ll".split(" "),
    ..."verison:version ic:ci innit:init in:install ins:install inst:install insta:install".split(" "),
    ..."instal:install isnt:install isnta:install isntal:install isntall:install install-clean:ci".split(" "),
    ..."isntall-clean:ci hlep:help dist-tags:dist-tag upgrade:update udpate:update rum:run".split(" "),
    ..."sit:install-ci-test urn:run ogr:org add-user:adduser".split(" "),
  ].map((pair) => pair.split(":") as [string, string]),
)

/** A subcommand word as its program reads it: npm's abbreviations and aliases made the command; others as written. */
function subcommandName(program: string, word: string): string {
  if (program !== "npm" || NPM_COMMANDS.has(word)) return word
  const alias = NPM_ALIASES.get(word)
  if (alias !== undefined) return alias
  let found: string | undefined
  for (const name of [...NPM_COMMANDS, ...NPM_ALIASES.keys()])
    if (name.startsWith(word)) {
      if (found !== undefined) return word // ambiguous: npm knows no such command
      found = name
    }
  return found === undefined ? word : (NPM_ALIASES.get(found) ?? found)
}

/**
 * Where a command's subcommand stands after the program's own options, or -1 when its words are not there. Other
 * programs' options before it go to `before` (`kubectl -n prod delete`: `-n prod`); git's global options do not.
 */
function subcommandsEnd(
  program: string,
  args: readonly string[],
  subcommands: readonly string[][],
  before: string[],
): number {
  let at = program === "git" ? gitSubcommandAt(args) : 0
  for (const wanted of subcommands) {
    // other programs' options before the subcommand: skipped, and the word after one as its possible value
    while (at < args.length && args[at].startsWith("-") && !wanted.includes(args[at])) {
      const takesNext = !args[at].includes("=") && at + 1 < args.length && !wanted.includes(args[at + 1])
      const next = at + (takesNext && !args[at + 1].startsWith("-") ? 2 : 1)
      for (; at < next; at++) before.push(args[at])
    }
    if (at >= args.length || !wanted.includes(subcommandName(program, args[at]))) return -1
    at++
  }
  return at
}

/** How one simple command the call runs stands to a pattern: matched, or how near it came (for the explanations). */
type RunMatch = { matched: true } | { matched: false; near?: string }
const NO_MATCH: RunMatch = { matched: false }

/** Whether a simple command is the pattern's program with its subcommand, flags and operands. */
function matchRan(pattern: CommandPattern, ran: RanCommand, places: () => PathPlaces): RunMatch {
  const program = ran.program
  if (!pattern.programs.includes(program)) return NO_MATCH
  const args = ranArgs(ran)
  const before: string[] = []
  const end = subcommandsEnd(program, args, pattern.subcommands, before)
  if (end < 0) return NO_MATCH
  // the options are the program's first subcommand's (`git worktree remove --forc`: git worktree's --force)
  const first = end - pattern.subcommands.length
  const key = patternKey(program, pattern.subcommands.length ? subcommandName(program, args[first]) : undefined)
  const spec = own(FLAG_VALUES, key) ?? {}
  const parsed = getopt(end === 0 ? args : args.slice(end), spec)
  // the program's options before its subcommand are its flags too (kubectl, npm: `kubectl -n prod delete`); their
  // words that are no option of the subcommand's table are values of options it does not know, not operands
  const options = before.length ? [...getopt(before, spec).options, ...parsed.options] : parsed.options
  const given = new Map<string, string[]>()
  for (const [name, list] of options) {
    const one = flagName(key, name)
    given.set(one, [...(given.get(one) ?? NO_WORDS), ...list])
  }
  if (program === "npm") npmFlagsOff(key, options, given)
  const present = (s: FlagSpelling) =>
    s.names.every((name) => given.has(flagName(key, name))) &&
    (s.value === undefined || given.get(flagName(key, s.names[0]))!.some((v) => wordGlob(s.value!).test(v)))
  for (const flag of pattern.flags) {
    const holds = flag.any.some(present)
    if (holds === flag.absent)
      return { matched: false, near: flag.absent ? `with ${flagText(flag)}` : `without ${flagText(flag)}` }
  }
  const matches = (operand: PatternOperand, word: string) => operandMatches(operand, word, places, ran.cwd)
  const excludes = (word: string) => pattern.operands.some((o) => o.excluded && matches(o, word))
  // find's `{}` stands for a root and what lies under it: left out only when both are, matched when either is
  const all = foundOperands(parsed.operands, ran.found)
  const kept = all.filter(({ word, subtree }) => !(excludes(word) && (!subtree || excludes(`${word}/${UNDER_ROOT}`))))
  for (const operand of pattern.operands)
    if (
      !operand.excluded &&
      !kept.some(
        ({ word, subtree }) =>
          matches(operand, word) ||
          (subtree && (matches(operand, `${word}/${UNDER_ROOT}`) || globUnder(operand, word, places, ran.cwd))),
      )
    )
      return {
        matched: false,
        near: operandMissText(pattern, operand, kept.length ? [] : all, matches),
      }
  return { matched: true }
}

/**
 * Why no operand matched, for the explanations: when `!glob`s left every operand out (`leftOut`: all of them, else
 * none), which glob left out which (`/tmp/x is left out by !/tmp/**`, though `/tmp/x` matches `/**`); else that none
 * matches.
 */
function operandMissText(
  pattern: CommandPattern,
  operand: PatternOperand,
  leftOut: readonly { word: string }[],
  matches: (operand: PatternOperand, word: string) => boolean,
): string {
  if (leftOut.length === 0) return `no operand matches ${operand.globs.join(" or ")}`
  return leftOut
    .map(({ word }, k) => {
      const by = pattern.operands.find((o) => o.excluded && matches(o, word))
      const glob = by === undefined ? "" : ` by !${by.globs.length > 1 ? `{${by.globs.join(",")}}` : by.globs[0]}`
      return `${word}${k === 0 ? " is left out" : ""}${glob}`
    })
    .join(", ")
}

/** A name standing for any file under a root that find searches (`{}`), for the path globs. */
export const UNDER_ROOT = "found-file"

/**
 * A command's operands, with `find ROOT... -exec CMD {}`'s `{}` made each root: `subtree` says the word stands for
 * that root and any file under it (find's -name and other tests are not judged: any may be found).
 */
export function foundOperands(
  operands: readonly string[],
  found: readonly string[] | undefined,
): { word: string; subtree: boolean }[] {
  return operands.flatMap<{ word: string; subtree: boolean }>((word) =>
    found && word.includes("{}")
      ? found.map((root) => ({ word: word.split("{}").join(root), subtree: true }))
      : [{ word, subtree: false }],
  )
}

/** Whether a path glob names a place under a root (`/etc/nginx/**` under `/etc`): files find may find there. */
function globUnder(operand: PatternOperand, root: string, placesOf: () => PathPlaces, cwd: readonly string[]): boolean {
  if (!operand.path) return false
  const places = placesOf()
  const abs = resolveOperand(root, places, cwd)
  return operand.globs.some((glob) => {
    const literal = normalizeGlob(expandPlaces(glob, places)).split(/[*?[{]/)[0]
    const dir = literal.slice(0, literal.lastIndexOf("/") + 1)
    return dir.startsWith(abs === "/" ? "/" : `${abs}/`)
  })
}

/**
 * npm (nopt) reads `--no-x` and `--x=false` as x turned off: such a flag counts as not given (`npm publish
 * --dry-run=false` publishes). Given both ways (`--dry-run --no-dry-run`), it counts as off: the rule errs to fire.
 */
function npmFlagsOff(key: string, options: Iterable<[string, string[]]>, given: Map<string, string[]>): void {
  for (const [name, list] of options)
    if (name.startsWith("no-")) given.delete(flagName(key, name.slice(3)))
    else if (list.length > 0 && list.every((value) => value === "false")) given.delete(flagName(key, name))
}

/** A pattern flag as it was written: `--force`, `-f`, `-f or --force-with-lease`. */
export function flagText(flag: PatternFlag): string {
  return flag.any
    .map((s) =>
      s.names.length === 1 && s.names[0].length > 1
        ? `--${s.names[0]}${s.value !== undefined ? `=${s.value}` : ""}`
        : `-${s.names.join("")}`,
    )
    .join(" or ")
}

/** A simple command as a verdict shows it: its words from the program on, one line, bounded. */
export function ranText(ran: RanCommand): string {
  return oneLine(ran.words.slice(ran.start).join(" "), RAN_SHOWN)
}

/** Where a simple command runs: `after sudo, in bash's code`; empty at the top of the line. */
export function ranWhere(ran: RanCommand): string {
  if (ran.via.length === 0) return ""
  return ` (${ran.via.map((v) => (v.endsWith(" code") || v.endsWith("'s code") ? `in ${v}` : `after ${v}`)).join(", ")})`
}

/**
 * Options whose value is a message a program sends or stores, never code it runs: a pull request's title and body,
 * release notes, an HTTP request's data. Such programs are not followed (gh runs code elsewhere: `gh codespace ssh`),
 * but a command rule's words only in such a value are text, as in a commit message: `gh pr create --body 'stop the
 * npm publish'` runs no npm. Their options: gh's pr, issue, release, gist and api; curl's request data.
 */
const MESSAGE_OPTIONS: ReadonlyMap<string, ReadonlySet<string>> = new Map([
  [
    "gh",
    new Set(
      "-t --title -b --body -n --notes -m --message --subject -d --desc --description -f --raw-field -F --field".split(
        " ",
      ),
    ),
  ],
  ["curl", new Set("-d --data --data-raw --data-ascii --data-binary --data-urlencode --json -F --form".split(" "))],
])

/**
 * The text of code the reader cannot follow: its words and here-documents, as the words code would name; the values
 * of a program's MESSAGE_OPTIONS left out (`--body TEXT`, `--body=TEXT`).
 */
function opaqueText(ran: RanCommand): string {
  const messages = MESSAGE_OPTIONS.get(ran.program)
  const words = messages ? withoutMessages(ran.words.slice(ran.start), messages) : ran.words.slice(ran.start)
  const text = words.join(" ")
  // a here-document a program sends as its message or data (`gh pr create --body-file -`, `curl -d @-`) is text
  const stdinIsData = messages !== undefined && ran.words.some((word) => STDIN_AS_DATA.test(word))
  return ran.stdin.length && !stdinIsData ? `${text}\n${ran.stdin.join("\n")}` : text
}

/** A word that makes gh or curl read its input as a body, a field or data: `-`, `@-`, `body=@-`, `-d@-`. */
const STDIN_AS_DATA = /^@?-$|=@?-$|^-[A-Za-z]@-$/

/** A command's words without the values of its message options (the option itself kept, as what it says). */
function withoutMessages(words: readonly string[], messages: ReadonlySet<string>): string[] {
  const kept: string[] = []
  for (let k = 0; k < words.length; k++) {
    const equals = words[k].indexOf("=")
    if (words[k].startsWith("--") && equals > 0 && messages.has(words[k].slice(0, equals))) {
      kept.push(words[k].slice(0, equals))
      continue
    }
    kept.push(words[k])
    if (messages.has(words[k])) k++ // its value: the next word
  }
  return kept
}

/** The first simple command of a reading that a pattern matches, and what to say of it; undefined when none. */
export function runsMatch(
  patterns: readonly CommandPattern[],
  read: CommandReading,
  places: () => PathPlaces,
): string | undefined {
  const { byProgram, opaqueRan } = ranIndex(read)
  for (const pattern of patterns)
    for (const name of pattern.programs) {
      const runs = byProgram.get(name) // the common case: none, so the pattern costs one lookup
      if (runs)
        for (const ran of runs)
          if (matchRan(pattern, ran, places).matched) return `runs \`${ranText(ran)}\`${ranWhere(ran)}`
    }
  if (opaqueRan.length === 0) return undefined
  for (const pattern of patterns)
    for (const ran of opaqueRan)
      if (ran.unread && isOpaqueNaming(pattern, ran))
        return `runs code the reader cannot read, whose words are given elsewhere (a git alias, a \$1 set elsewhere): it may be \`${pattern.text}\`: \`${ranText(ran)}\`${ranWhere(ran)}`
      else if (isOpaqueNaming(pattern, ran))
        return `runs code the reader cannot follow that names \`${pattern.text}\`: \`${ranText(ran)}\`${ranWhere(ran)}`
  return undefined
}

export function ranIndex(read: CommandReading): RanIndex {
  if (read.index) return read.index
  const index: RanIndex = { byProgram: new Map(), opaqueRan: [], keys: new Set() }
  for (const ran of read.ran) {
    const list = index.byProgram.get(ran.program)
    if (list) list.push(ran)
    else index.byProgram.set(ran.program, [ran])
    if (ran.opaque) index.opaqueRan.push(ran)
    // `program word` for each word subcommandsEnd could take for the subcommand: after git's global options the
    // one word; for others the first word after the leading options, and each word after an option (its value, or
    // the subcommand itself)
    index.keys.add(ran.program)
    const words = ran.words
    let k = ran.start + 1
    if (ran.program === "git") k += gitSubcommandAt(ranArgs(ran))
    else
      while (k < words.length && words[k][0] === "-") {
        const value = k + 1 < words.length && words[k + 1][0] !== "-" // its value, or the subcommand
        if (value) index.keys.add(`${ran.program} ${subcommandName(ran.program, words[k + 1])}`)
        k += value ? 2 : 1
      }
    if (k < words.length) index.keys.add(`${ran.program} ${subcommandName(ran.program, words[k])}`)
  }
  read.index = index
  return index
}

/**
 * The runs screen of a plan: whether any command rule of it could fire on this call. One of the rules' keys is among
 * the call's (`git push` is run), or code the reader cannot follow names one of their programs. When it fails (most calls), none of the command rules is looked at.
 */
export function runsScreenHolds(keys: ReadonlySet<string>, programs: readonly string[], args: unknown): boolean {
  if (!isMapping(args) || typeof args.command !== "string") return false
  const index = ranIndex(readCommand(args.command))
  for (const key of index.keys) if (keys.has(key)) return true
  for (const ran of index.opaqueRan) {
    if (ran.unread) return true
    ran.code ??= capText(opaqueText(ran), REGEX_INPUT_CAP)
    // its own program was keyed above (`npm test` is npm, read as a pattern on npm says: isOpaqueNaming)
    for (const program of programs) if (program !== ran.program && ran.code.includes(program)) return true
  }
  return false
}

/**
 * Whether a command runs code the reader cannot follow that names the pattern's words. The pattern's own program
 * is not such code: it was matched word by word (`npm publish --dry-run` is npm, read as the pattern says).
 */
function isOpaqueNaming(pattern: CommandPattern, ran: RanCommand): boolean {
  if (ran.unread) return true
  if (!ran.opaque || pattern.programs.includes(ran.program)) return false
  ran.code ??= capText(opaqueText(ran), REGEX_INPUT_CAP)
  const text = ran.code
  let named = false // the common case, decided without a regex: the code does not name the program at all
  for (const name of pattern.programs) named ||= text.includes(name)
  return named && pattern.named.every((regex) => regex.test(text))
}

/** Why no pattern matched, for `/anchor test` and the examples: where the words appear, and what they do there. */
export function runsMissWhy(
  patterns: readonly CommandPattern[],
  read: CommandReading,
  places: () => PathPlaces,
): string {
  for (const pattern of patterns)
    for (const ran of read.ran) {
      const result = matchRan(pattern, ran, places)
      if (!result.matched && result.near) return `runs \`${ranText(ran)}\`, but ${result.near}: not \`${pattern.text}\``
    }
  for (const pattern of patterns)
    for (const ran of read.ran) {
      const program = ran.program
      const inWords = ran.words.slice(ran.start + 1).some((word) => pattern.named[0].test(word))
      if (inWords) return `\`${pattern.text}\` appears only as ${program}'s argument: not run`
      if (ran.stdin.some((doc) => pattern.named[0].test(doc)))
        return `\`${pattern.text}\` appears only in a here-document fed to ${program}: not run`
    }
  const shown = read.ran.slice(0, 5).map((ran) => `\`${ranText(ran)}\``)
  return shown.length
    ? `none of the commands it runs (${shown.join(", ")}${read.ran.length > 5 ? ", ..." : ""}) is ${patterns.map((p) => `\`${p.text}\``).join(" or ")}`
    : "it runs no command"
}

/**
 * Whether a call runs a command one of the patterns names (`runs:`): what it runs and where, or undefined. The
 * command is read once per call (readCommand), the same reading guard-integrity and the step counter use; its
 * paths resolve in the bash tool's `workdir` when given.
 */
export function runsHolds(
  patterns: readonly CommandPattern[],
  args: unknown,
  env: EngineEnv,
  why?: string[],
): string | undefined {
  if (!isMapping(args) || typeof args.command !== "string") {
    why?.push("runs: the call has no command argument (only bash has one)")
    return undefined
  }
  const read = readCommand(args.command)
  const workdir = typeof args.workdir === "string" ? args.workdir : undefined
  const places = () => pathPlaces(env, workdir)
  const ran = runsMatch(patterns, read, places)
  why?.push(ran ? `runs: ${ran}` : `runs: ${runsMissWhy(patterns, read, places)}`)
  return ran
}

const NO_PROJECT = "/\0no project" // a path no command operand resolves to

/** The places a path pattern names, for a call (made per call that reaches a command rule; a few strings). */
export function pathPlaces(env: EngineEnv, workdir: string | undefined): PathPlaces {
  if (lastPlaces && lastPlacesEnv === env && lastPlacesWorkdir === workdir) return lastPlaces
  lastPlaces = pathPlacesUncached(env, workdir)
  lastPlacesEnv = env
  lastPlacesWorkdir = workdir
  return lastPlaces
}
// One entry: every path rule of a call asks for the same places.
let lastPlaces: PathPlaces | undefined
let lastPlacesEnv: EngineEnv | undefined
let lastPlacesWorkdir: string | undefined

function pathPlacesUncached(env: EngineEnv, workdir: string | undefined): PathPlaces {
  const { directory, worktree, home, tmpdir, dataDir } = env.paths
  const inWorktree = worktree !== "/" && relativeInside(worktree, directory) !== undefined
  // a project at `/` is none the plugin was told of: `$PROJECT` then names no path, or every path would be inside it
  // (nor would relative paths be outside it: they resolve in a stand-in directory there)
  const project = inWorktree ? worktree : directory === "/" ? NO_PROJECT : directory
  const cwd = directory === "/" ? NO_PROJECT : directory
  const here = workdir?.trim() ? resolvePath(cwd, workdir, home) : cwd
  return { directory: here, project, home, tmpdir, dataDir }
}

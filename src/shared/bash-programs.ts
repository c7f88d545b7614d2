/**
 * `PROGRAMS`, what each program does with its arguments; `readCommand`, one reading per call; `isReadOnlyCommand`,
 * the answer both plugins give to "does this command change anything".
 */
import {
  NOTHING_READ,
  OPAQUE,
  afterOptions,
  copies,
  getopt,
  has,
  links,
  modeThenFiles,
  prints,
  reading,
  readsFiles,
  searches,
  values,
  writesFiles,
  writesOutput,
  type ProgramReader,
  type Reading,
} from "./bash-words"
import { type SimpleCommand, MAX_PREFIXES, NO_WORDS, scanCommand } from "./bash-scan"
import { gitStashUntracked, GIT_VALUE_GLOBALS, gitCleanArgs, gitGlobals, isGitDryRun, isReadOnlyGit } from "./git-words"
import { REGEX_INPUT_CAP, capText } from "./text"
import {
  ANY_PATH,
  FIND_EXEC,
  FIND_NAME_TESTS,
  FIND_VALUE_WORDS,
  FIND_WRITES_FILE,
  findNameTest,
  sedScriptEffects,
  type FindTest,
} from "./bash-scripts"

// What a bash command does with each of its words, the way each tool's manual says. A quote-aware scan, not a shell:
// `scanCommand` splits a command line into simple commands (at unquoted `|`, `||`, `&&`, `;`, `&`, newlines and
// parentheses) with their redirections and here-documents; `readSimple` looks the program up in PROGRAMS, the one
// table of what each program does with its arguments: which are scripts or patterns (text, never paths), which are
// files it reads, which files it writes (creates, changes, moves or deletes). Three verdicts rest on one reading of
// the call (readCommand): the changing-step classifier (`isReadOnlyCommand`), guard-integrity (`bashTouchesGuard`)
// and the command patterns of `runs:` (every simple command it would run, recorded as RanCommand).
// A program the table does not know, an interpreter's script (awk, perl, python -c, ...), a script file and a
// command substitution are opaque: they may do anything, so the command is a changing step and a guard name anywhere
// in it blocks. A character of a script (`.`, `/`, `*`) is never taken for a path.

/** `sudo`, `nice`, `timeout 5`, `xargs -n1`: the words after their options are a command of their own. */
export function wrapper(valueLetters: string, skipOperands = 0, longValues: readonly string[] = []): ProgramReader {
  return (args, stdin, depth) => {
    const rest = afterOptions(args, valueLetters, longValues).slice(skipOperands)
    if (rest.length === 0) return reading()
    // Their own words (`env -C DIR`) are read: a guard name there counts when the command changes something.
    const own = args.slice(0, args.length - rest.length)
    const inner = readSimple(rest, stdin, depth + 1)
    return { ...inner, reads: [...own, ...inner.reads] }
  }
}

/**
 * `xargs [OPTION]... COMMAND [ARG]...`: COMMAND runs on the words xargs reads from its input (`-a FILE` or a pipe),
 * which this reader does not follow: when COMMAND changes something (or is shell code) it is opaque, so a guard name anywhere in the
 * command line (`echo .opencode/x.yaml | xargs rm`) blocks as it did before the reader; a read-only one stays so.
 */
const readXargs: ProgramReader = (args, stdin, depth) => {
  const inner = wrapper("nILPsdEa", 0, XARGS_LONG_VALUES)(args, stdin, depth)
  return inner.changing || inner.nested.length ? { ...inner, opaque: true, changing: true } : inner
}
/** xargs's long options that take the next word (`--process-slot-var SLOT rm -rf x`: SLOT is no command). */
const XARGS_LONG_VALUES = [
  ..."arg-file delimiter eof replace max-lines max-args max-procs max-chars process-slot-var".split(" "),
]

/** GNU parallel's options that take the next word (parallel --help; -a, -I and -j the common ones). */
const PARALLEL_VALUES = "adEIjLlnNPSs"
const PARALLEL_LONG_VALUES = [
  ..."arg-file delimiter eof replace jobs max-lines max-args max-replace-args sshlogin max-chars".split(" "),
  ..."colsep tag-string joblog results timeout delay memfree load basefile workdir env".split(" "),
]
/** parallel's replacement strings: the argument, its basename, dirname, without extension, by position. */
const PARALLEL_REPLACEMENT = /\{(?:\d+)?(?:\/|\/\/|\.|\/\.)?\}/g

/**
 * `parallel [OPTION]... [COMMAND [ARG]...] ::: INPUT...` (GNU parallel): each input is given to COMMAND in place of
 * `{}`, `{1}`, `{/}`, `{.}`..., or after its words when it has none; without COMMAND each input is a command line.
 * Every line is shell code parallel hands to a shell, read as `bash -c`'s. Inputs from a file (`::::`, `-a`) or the
 * standard input are not known: COMMAND is then read as xargs reads its own.
 */
const readParallel: ProgramReader = (args, stdin, depth) => {
  const rest = afterOptions(args, PARALLEL_VALUES, PARALLEL_LONG_VALUES)
  const at = rest.findIndex((word) => /^:{3,4}\+?$/.test(word))
  const command = at === -1 ? rest : rest.slice(0, at)
  const inputs = at === -1 ? NO_WORDS : rest.slice(at + 1)
  if (at === -1 || inputs.some((word) => /^:{4}\+?$/.test(word)) || rest[at].startsWith("::::"))
    return command.length ? readXargs(command, stdin, depth) : OPAQUE()
  const literal = inputs.filter((word) => !/^:{3}\+?$/.test(word)).slice(0, MAX_PARALLEL_INPUTS)
  if (command.length === 0) return reading({ nested: literal, changing: true })
  // the command's words are shell code joined by blanks (`parallel 'rm -rf' ::: x`), each input one quoted word
  const lines = literal.map((input) => {
    let replaced = false
    const code = command.join(" ").replace(PARALLEL_REPLACEMENT, () => ((replaced = true), shellWord(input)))
    return replaced ? code : `${code} ${shellWord(input)}`
  })
  return reading({ nested: lines, changing: true })
}
/** Inputs of one parallel line read (each makes a command line; more say nothing new). */
const MAX_PARALLEL_INPUTS = 16

/** A word as the shell would take it back: plain when it holds nothing special, else in single quotes. */
function shellWord(word: string): string {
  return /^[\w@%+=:,./~-]+$/.test(word) ? word : singleQuoted(word)
}

/** `bash -c CODE`, `sh <<EOF`, `eval CODE`: shell code, read like a command line; a script file is opaque. */
const shell: ProgramReader = (args, stdin) => {
  const parsed = getopt(args, { values: "oO", long: ["rcfile", "init-file"] })
  // `bash -n` (`-o noexec`) reads the code and runs none of it: a syntax check
  if (has(parsed, "n") || values(parsed, "o").includes("noexec")) return NOTHING_READ
  // a start-up file (`--rcfile F`, `--init-file F`) is code the shell runs first: a file written on this line is read
  const startup = values(parsed, "rcfile", "init-file")
  if (startup.length) return startupCode(startup, OPAQUE())
  // `sh -c CODE NAME ARG...`: NAME and the ARGs are $0, $1, ...: the files CODE works on, read like operands; the
  // code is read with them in place of `$1`, `"$@"`, ... (`bash -c '$1' _ 'git reset --hard'` runs that command)
  if (has(parsed, "c")) {
    const code = parsed.operands[0] ?? ""
    const positional = args.slice(args.indexOf(code) + 1) // as bash reads them: `--hard` there is $3, no option
    const nested = withPositional(code, positional)
    if (nested === undefined) return { ...OPAQUE(), reads: parsed.operands, unread: true } // `$1` nothing sets
    return reading({ nested: [nested], reads: positional })
  }
  if (parsed.operands.length) return startupCode(parsed.operands.slice(0, 1), OPAQUE()) // runs a script file
  // its code comes from its own here-document, or from a pipe (`cat <<EOF | sh`: that document is read as well)
  return stdin.length ? reading({ nested: stdin }) : { ...OPAQUE(), codeFromPipe: true }
}

/**
 * The code of a shell's start-up or script file (`BASH_ENV=f`, `--rcfile f`, `bash f`): the text written to it earlier
 * on the line (`cat > f <<'EOF' ... EOF`), read like `bash -c`'s code; a file not written on the line is `otherwise`
 * (opaque: what it holds is not known).
 */
function startupCode(files: readonly string[], otherwise: Reading): Reading {
  const code: string[] = []
  for (const file of files) {
    const text = lineFiles.get(file.replace(/^\.\//, ""))
    if (text === undefined) return otherwise
    code.push(text)
  }
  return reading({ nested: code, changing: true })
}

/** Files written on the line being read, by a here-document (`cat > f <<'EOF'`, `tee f <<EOF`): their text. */
const lineFiles = new Map<string, string>()

/** A command that writes its here-document to files (`cat > f <<'EOF'`, `tee f <<EOF`): noted in lineFiles. */
function noteLineFiles(simple: SimpleCommand): void {
  const files = [...simple.redirects, ...(simple.words[0] === "tee" ? getopt(simple.words.slice(1)).operands : [])]
  for (const file of files) lineFiles.set(file.replace(/^\.\//, ""), simple.heredocs.join("\n"))
}

/**
 * `sh -c CODE NAME ARG...`'s code with its positional parameters in place: `$0`, `$1`, `${1}`, `"$@"`, `$*` become the
 * words given, split as bash splits them: unquoted, a value is split into words (`bash -c '$1' _ 'git reset --hard'`
 * runs `git reset --hard`); quoted, it stays one word (`bash -c '"$1"' _ 'git reset --hard'` runs a program named by
 * the whole string, which does not exist). One that nothing sets is left as it is when it is an argument
 * (`xargs sh -c 'wc -l "$1"' _`: a file for wc); undefined when it is a program (`sh -c '$2' _ x`): what runs is not
 * known.
 */
function withPositional(code: string, positional: readonly string[]): string | undefined {
  if (!code.includes("$")) return code
  let unknown = false
  const parameter = /"\$(?:\{([0-9]+|[@*])\}|([0-9]|[@*]))"|\$(?:\{([0-9]+|[@*])\}|([0-9]|[@*]))/y // "$1" or $1
  let out = ""
  let double = false
  for (let i = 0; i < code.length; i++) {
    const ch = code[i]
    if (ch === "'" && !double) {
      // single quotes: nothing expands (`awk '{print $1}'`)
      const close = code.indexOf("'", i + 1)
      const end = close === -1 ? code.length : close + 1
      out += code.slice(i, end)
      i = end - 1
      continue
    }
    if (ch === "\\") {
      out += code.slice(i, i + 2)
      i++
      continue
    }
    parameter.lastIndex = i
    const found = ch === "$" || ch === '"' ? parameter.exec(code) : null
    if (!found) {
      if (ch === '"') double = !double
      out += ch
      continue
    }
    const name = found[1] ?? found[2] ?? found[3] ?? found[4]
    const quoted = found[0][0] === '"'
    const values =
      name === "@" || name === "*"
        ? positional.slice(1)
        : [positional[Number(name)] ?? (name === "0" ? "sh" : undefined)]
    if (values[0] === undefined && values.length === 1) {
      unknown = true
      out += found[0] // unset: left as written, an argument the command is given
    } else if (quoted)
      out += name === "@" ? values.map((v) => singleQuoted(v!)).join(" ") : singleQuoted(values.join(" "))
    else out += double ? values.join(" ").replace(/["\\$`]/g, "\\$&") : values.join(" ")
    i += found[0].length - 1
  }
  return unknown && runsUnsetParameter(out) ? undefined : out
}

/** A value as one shell word: in single quotes, its own single quotes closed and escaped. */
function singleQuoted(value: string): string {
  return `'${value.replace(/'/g, "'\\''")}'`
}

/** Whether code runs a program named by a positional parameter (`"$1" -rf x`, `$2`), not just passes one. */
function runsUnsetParameter(code: string): boolean {
  const scan = scanCommand(code)
  if (!scan) return true
  return scan.commands.some((simple) => {
    const program = simple.words.find((word) => !/^[A-Za-z_][A-Za-z0-9_]*=/.test(word) && !SHELL_KEYWORDS.has(word))
    return program !== undefined && /\$\{?[0-9@*]/.test(program)
  })
}

// sed ---------------------------------------------------------------------------------------------------------------

/**
 * `sed [-n] [-e SCRIPT | -f FILE]... [-i[SUFFIX]] [FILE...]` (GNU sed's manual): the first operand is the script
 * when no -e/-f gives one; the other operands are the input files, written in place with -i / --in-place. A script
 * is read command by command: `w FILE`, `W FILE` and the `s///w FILE` flag write FILE; `e COMMAND` runs COMMAND
 * (read like any command line), `e` alone and the `s///e` flag run text the script makes (opaque); `r FILE`/`R FILE`
 * read. A script it cannot follow, or one from a file (-f), is opaque.
 */
const readSed: ProgramReader = (args) => {
  const parsed = getopt(args, {
    values: "efl",
    optional: "i",
    long: ["expression", "file", "line-length"],
  })
  const scripts = values(parsed, "e", "expression")
  const scriptFiles = values(parsed, "f", "file")
  const operands = parsed.operands
  // Without -e or -f, the first operand is the script and the rest are files.
  const scriptFirst = scripts.length === 0 && scriptFiles.length === 0
  if (scriptFirst) scripts.push(operands[0] ?? "")
  const inPlace = has(parsed, "i", "in-place")
  const throughLinks = has(parsed, "follow-symlinks")
  const result = reading({ writes: [], reads: [], nested: [], changing: inPlace, opaque: scriptFiles.length > 0 })
  for (let k = scriptFirst ? 1 : 0; k < operands.length; k++)
    if (inPlace) result.writes.push({ word: operands[k], throughLinks })
    else result.reads.push(operands[k])
  for (const file of scriptFiles) result.reads.push(file)
  for (const script of scripts) {
    const effects = sedScriptEffects(script)
    if (effects === null || effects.runs) result.opaque = true
    if (effects === null) continue
    for (const file of effects.writes) result.writes.push({ word: file, throughLinks: true })
    for (const file of effects.reads) result.reads.push(file)
    for (const line of effects.commands) result.nested.push(line)
  }
  if (result.opaque || result.writes.length || result.nested.length) result.changing = true
  return result
}

/** Whether shell code a command runs changes anything or cannot be followed (read on its own, recording nothing). */
function codeChanges(code: string, depth: number): boolean {
  const outer = ranSink
  try {
    const inner = readCommandAt(code, depth + 1)
    return inner.changing || inner.opaque
  } finally {
    ranSink = outer
  }
}

/**
 * `find ROOT... EXPRESSION` (GNU find's manual): `-delete`, and `-exec`/`-ok` with a command that writes its `{}`,
 * reach the paths under each ROOT for which the expression can be true. The expression is parsed (`!`, `-a`, `-o`,
 * `,`, parentheses) and judged by its name tests (-name, -iname, -path, -wholename, -regex and their -i forms):
 * every other test, every action and a negated test are taken as true for any path, so the judgement can only
 * err towards "reached". `-fprint FILE` writes FILE; the command of `-exec` is read like any other.
 */
const readFind: ProgramReader = (args, _stdin, depth) => {
  let k = 0
  while (k < args.length && /^-([HLP]|O\d*|D)$/.test(args[k])) k += args[k] === "-D" ? 2 : 1
  const roots: string[] = []
  while (k < args.length && !/^[-(!,)]/.test(args[k])) roots.push(args[k++])
  if (roots.length === 0) roots.push(".")
  const result = reading({ writes: [], reads: [...roots], nested: [] })
  let reachesMatches = false
  const primary = (): FindTest => {
    const arg = args[k++]
    if (FIND_NAME_TESTS.has(arg)) return findNameTest(arg, args[k++] ?? "") ?? ANY_PATH
    if (arg === "-delete") reachesMatches = true
    else if (FIND_EXEC.has(arg)) {
      let end = k
      while (end < args.length && args[end] !== ";" && args[end] !== "+") end++
      const outerFound = ranFound
      ranFound = roots // its `{}` is each file found under them: what command patterns match it as
      let inner: Reading
      try {
        inner = readSimple(args.slice(k, end), [], depth + 1)
      } finally {
        ranFound = outerFound
      }
      k = end + 1
      for (const target of inner.writes) {
        if (target.word.includes("{}")) reachesMatches = true
        else result.writes.push(target)
      }
      result.reads.push(...inner.reads.filter((word) => !word.includes("{}")))
      result.nested.push(...inner.nested)
      // it may do anything with {}: code it cannot follow, or shell code that changes something (a shell that only
      // prints, `sh -c 'printf "%s\n" "$1"' _ {}`, reaches nothing)
      if (inner.opaque || inner.nested.some((code) => codeChanges(code, depth))) reachesMatches = true
      result.changing ||= inner.changing
      result.opaque ||= inner.opaque
    } else if (FIND_WRITES_FILE.has(arg)) {
      result.writes.push({ word: args[k++] ?? "", throughLinks: true })
      if (arg === "-fprintf") k++
    } else if (FIND_VALUE_WORDS.has(arg)) k++
    return ANY_PATH
  }
  const unary = (): FindTest => {
    if (args[k] === "!" || args[k] === "-not") {
      k++
      unary()
      return ANY_PATH // a negated name test can match what the test does not
    }
    if (args[k] === "(") {
      k++
      const inner = or()
      if (args[k] === ")") k++
      return inner
    }
    return primary()
  }
  const and = (): FindTest => {
    const tests = [unary()]
    while (k < args.length && !/^(-o|-or|,|\))$/.test(args[k])) {
      if (args[k] === "-a" || args[k] === "-and") k++
      else tests.push(unary())
    }
    return (path) => tests.every((test) => test(path))
  }
  const or = (): FindTest => {
    const branches = [and()]
    while (k < args.length && /^(-o|-or|,)$/.test(args[k])) {
      k++
      branches.push(and())
    }
    return (path) => branches.some((test) => test(path))
  }
  const expression = k < args.length ? or() : ANY_PATH
  while (k < args.length) or() // a stray `)`: read the rest too, for its actions
  result.lists = roots.map((root) => ({ word: root, throughLinks: false, filter: expression }))
  if (reachesMatches) result.writes.push(...result.lists)
  if (result.writes.length) result.changing = true
  return result
}

// git, awk, perl ------------------------------------------------------------------------------------------------------

/** git: the read-only subcommands read their operands; `rm`, `mv` and `clean` write theirs; any other changes. */
const readGit: ProgramReader = (args, stdin, depth) => {
  const globals = gitGlobals(args)
  const envConfig = gitEnvConfig
  gitEnvConfig = NO_WORDS // the environment of this git only, not of the commands it runs
  const alias = gitAliasOf(args, globals.at, envConfig)
  if (alias !== undefined) return readGitAlias(args, globals.at, alias, stdin, depth)
  if (isReadOnlyGit(args, globals)) return reading({ reads: args.filter((arg) => !arg.startsWith("-")) })
  const { at, global } = globals
  const sub = args[at]
  const rest = args.slice(at + 1)
  if (sub === "clean") {
    const cleaned = gitCleanArgs(rest)
    const writes = (cleaned ?? []).map((word) => ({ word, throughLinks: false }))
    return reading({ writes, reads: global, changing: !!cleaned })
  }
  const stashed = sub === "stash" ? gitStashUntracked(rest) : undefined
  if (stashed)
    return reading({ writes: stashed.map((word) => ({ word, throughLinks: false })), reads: global, changing: true })
  // A commit or tag message (-m TEXT, -am TEXT, --message=TEXT) is text; the other operands are paths or names, and
  // so is the value of any other --option=VALUE (`--directory=DIR`); `--output=FILE` (diff, log, archive) is written.
  const operands: string[] = []
  const output: string[] = []
  for (let j = 0; j < rest.length; j++) {
    const value = /^--([^=]+)=([\s\S]*)$/.exec(rest[j])
    if (rest[j] === "--") {
      operands.push(...rest.slice(j + 1))
      break
    }
    if (/^-[a-zA-Z]*m$/.test(rest[j]) || rest[j] === "--message") j++
    else if (value?.[1] === "output") output.push(value[2])
    else if (value && value[1] !== "message") operands.push(value[2])
    else if (!rest[j].startsWith("-")) operands.push(rest[j])
  }
  const removes = (sub === "rm" || sub === "mv") && !rest.some(isGitDryRun) // `git rm -n` lists what it would remove
  const writes = [
    ...output.map((word) => ({ word, throughLinks: true })),
    ...(removes ? operands : []).map((word) => ({ word, throughLinks: false })),
  ]
  const runs = gitRuns(sub, rest)
  const own = reading({ writes, reads: removes ? global : [...global, ...operands], changing: true, nested: runs.code })
  if (runs.command.length === 0) return own
  // `git bisect run CMD ARG...`: git runs that command as a wrapper runs its own (`sudo CMD ARG...`)
  const inner = readSimple(runs.command, [], depth + 1)
  return {
    ...inner,
    writes: [...own.writes, ...inner.writes],
    reads: [...own.reads, ...inner.reads],
    nested: [...own.nested, ...inner.nested],
    changing: true,
  }
}

/**
 * git config given in the environment of the git being read (`GIT_CONFIG_COUNT`/`GIT_CONFIG_KEY_0`/`GIT_CONFIG_VALUE_0`,
 * `GIT_CONFIG_PARAMETERS`), as `KEY=VALUE`: set by readSimple for readGit, which takes it.
 */
let gitEnvConfig: readonly string[] = NO_WORDS

/** The `KEY=VALUE` settings the GIT_CONFIG_* variables of a command give git. */
function gitConfigFromEnv(names: readonly string[], values: readonly string[]): string[] {
  const at = (name: string) => values[names.lastIndexOf(name)]
  const out: string[] = []
  const count = Number(at("GIT_CONFIG_COUNT") ?? 0)
  for (let k = 0; k < Math.min(count, 64); k++) {
    const key = at(`GIT_CONFIG_KEY_${k}`)
    if (key !== undefined) out.push(`${key}=${at(`GIT_CONFIG_VALUE_${k}`) ?? ""}`)
  }
  // `'alias.nuke'='reset' 'core.pager'='cat'` (or the older `'alias.nuke=reset'`)
  for (const [, key, value] of (at("GIT_CONFIG_PARAMETERS") ?? "").matchAll(/'([^']*)'(?:='([^']*)')?/g))
    out.push(value === undefined ? key : `${key}=${value}`)
  return out
}

const UNKNOWN_ALIAS = "\0unknown" // an alias whose value this command line does not give (`--config-env`)

/**
 * The alias git's subcommand is, when this command line defines it (`git -c alias.nuke=reset nuke --hard`,
 * `-calias.f=push`, the environment's config, `--config-env alias.nuke=VAR`: UNKNOWN_ALIAS); undefined otherwise.
 */
function gitAliasOf(args: readonly string[], at: number, envConfig: readonly string[]): string | undefined {
  const sub = args[at]
  if (sub === undefined || (at === 0 && envConfig.length === 0)) return undefined // most calls: no config given
  const key = `alias.${sub.toLowerCase()}=`
  let value: string | undefined
  const consider = (setting: string, unknown = false) => {
    if (setting.toLowerCase().startsWith(key)) value = unknown ? UNKNOWN_ALIAS : setting.slice(key.length)
  }
  for (const setting of envConfig) consider(setting)
  for (let k = 0; k < at; k++) {
    const arg = args[k]
    if (arg === "-c") consider(args[++k] ?? "")
    else if (arg.startsWith("-c") && arg.length > 2) consider(arg.slice(2))
    else if (arg === "--config-env") consider(args[++k] ?? "", true)
    else if (arg.startsWith("--config-env=")) consider(arg.slice("--config-env=".length), true)
    else if (GIT_VALUE_GLOBALS.has(arg)) k++
  }
  return value
}

/**
 * A git alias run: `!CMD` is shell code git runs with the arguments after it; any other value is git's words in place
 * of the alias (`nuke --hard` with `alias.nuke=reset` is `git reset --hard`). A value not given here is opaque.
 */
function readGitAlias(args: string[], at: number, alias: string, stdin: string[], depth: number): Reading {
  const rest = args.slice(at + 1)
  if (alias === UNKNOWN_ALIAS) return { ...OPAQUE(), unread: true }
  if (alias.startsWith("!")) return reading({ nested: [[alias.slice(1), ...rest].join(" ")], changing: true })
  const scanned = scanCommand(alias)
  if (!scanned || scanned.commands.length !== 1 || scanned.substituted) return OPAQUE()
  return readSimple(["git", ...args.slice(0, at), ...scanned.commands[0].words, ...rest], stdin, depth + 1)
}

/** git's options whose value is shell code it runs: `git rebase -x CMD`, `git filter-branch --tree-filter CMD`. */
const GIT_CODE_OPTIONS = /^--(?:exec|(?:env|tree|index|parent|msg|commit|tag-name)-filter)$/

/**
 * What a git subcommand runs besides itself. `code`: shell code, read like a command line (as `eval`'s): `git rebase
 * -x CMD`/`--exec=CMD` (after each commit), the filters of `git filter-branch`, `git submodule foreach CMD` (one word,
 * in each submodule). `command`: a command given as its words, run as they are: `git bisect run CMD ARG...`, `git
 * submodule foreach CMD ARG...`. Where it runs (a submodule) is not followed: its paths resolve as the line's.
 */
function gitRuns(sub: string, rest: readonly string[]): { code: string[]; command: string[] } {
  const none = { code: NO_WORDS, command: NO_WORDS }
  if (sub === "bisect") return rest[0] === "run" ? { code: NO_WORDS, command: rest.slice(1) } : none
  if (sub === "submodule") {
    let k = rest.indexOf("foreach")
    if (k < 0) return none
    for (k++; k < rest.length && rest[k].startsWith("-"); k++); // --recursive
    if (k === rest.length - 1) return { code: [rest[k]], command: NO_WORDS }
    return { code: NO_WORDS, command: rest.slice(k) }
  }
  if (sub !== "rebase" && sub !== "filter-branch") return none
  const code: string[] = []
  for (let k = 0; k < rest.length; k++) {
    const equals = rest[k].indexOf("=")
    if (rest[k].startsWith("--") && equals > 0 && GIT_CODE_OPTIONS.test(rest[k].slice(0, equals)))
      code.push(rest[k].slice(equals + 1))
    else if (GIT_CODE_OPTIONS.test(rest[k]) || (sub === "rebase" && /^-[a-zA-Z]*x$/.test(rest[k])))
      code.push(rest[++k] ?? "")
  }
  return { code: code.filter((line) => line !== ""), command: NO_WORDS }
}

/** An awk program that writes or runs something: `system(...)`, `print > file`, `print | cmd`, `cmd | getline`. */
const AWK_EFFECTS = /\bsystem\s*\(|\bprintf?\b[^;{}]*[>|]|\|\s*getline/
/** A perl filter (-n/-p) that does more than print: these words write files, run commands or run code it reads. */
const PERL_EFFECTS =
  /\b(?:system|exec|unlink|rename|open|sysopen|mkdir|rmdir|symlink|link|chmod|chown|truncate|utime|qx|eval|require)\b|`/

/**
 * `awk [-F FS] [-v VAR=VALUE] [-f FILE | PROGRAM] [FILE | VAR=VALUE]...`: the program is a script, the operands are
 * read. An awk program can write files and run commands, so guard names in it count (opaque); it is a changing step
 * only when it writes or runs something (AWK_EFFECTS), or when it comes from a file.
 */
const readAwk: ProgramReader = (args) => {
  const parsed = getopt(args, { values: "Ffve", long: ["file", "assign", "field-separator", "source"] })
  const files = values(parsed, "f", "file")
  const scripts = values(parsed, "e", "source")
  const operands = [...parsed.operands]
  if (files.length === 0 && scripts.length === 0) scripts.push(operands.shift() ?? "")
  return reading({
    reads: [...files, ...operands.filter((word) => !/^[A-Za-z_][A-Za-z0-9_]*=/.test(word))],
    changing: files.length > 0 || scripts.some((script) => AWK_EFFECTS.test(script)),
    opaque: true,
    nested: scripts.flatMap(awkCommands),
  })
}

/** An awk string literal's text: `"..."` with its escapes (`\"`, `\\`, `\n`, `\040`, gawk's `\x20`) decoded. */
const AWK_STRING = String.raw`"((?:[^"\\]|\\.)*)"`
/** Where an awk program hands a string to the shell: `system("CMD")`, `"CMD" | getline`, `print ... | "CMD"`. */
const AWK_SHELL_STRINGS = [
  new RegExp(String.raw`\bsystem\s*\(\s*${AWK_STRING}`, "g"),
  new RegExp(String.raw`${AWK_STRING}\s*\|\s*getline`, "g"),
  new RegExp(String.raw`(?<![|&])\|&?\s*${AWK_STRING}`, "g"),
  // what it prints into a shell is that shell's code: `print "rm -rf /" | "sh"`
  new RegExp(
    String.raw`\bprintf?\s*\(?\s*${AWK_STRING}\s*\)?\s*\|\s*"(?:/(?:usr/)?bin/)?(?:ba|da|k|z)?sh\b[^"]*"`,
    "g",
  ),
]

/**
 * The command lines an awk program runs from string literals, read like `sh -c`'s code (awk hands each to
 * /bin/sh): `system("rm -rf /")`, `"git push -f" | getline`, `print | "sh"`. A command built from fields or
 * variables (`system("rm " $1)`) is read from its literal part only, as `rm $X` would be.
 */
function awkCommands(script: string): string[] {
  if (!script.includes('"')) return NO_WORDS
  const found: string[] = []
  for (const pattern of AWK_SHELL_STRINGS)
    for (const match of script.matchAll(pattern)) found.push(unescapeBackslashes(match[1].replace(/\\"/g, '"')))
  return found
}

/**
 * `python3 -c CODE`, `node -e CODE`, `ruby -e CODE` (and perl's -e, below): code that may do anything (opaque), from
 * which the shell commands it runs with literal strings are read as command lines (interpreterCommands).
 */
function interpreter(codeOption: string): ProgramReader {
  return (args) => {
    const at = args.findIndex((arg) => arg.startsWith(codeOption)) // `-c CODE`, or the code attached: `-cCODE`
    const code = at === -1 ? undefined : args[at] === codeOption ? args[at + 1] : args[at].slice(codeOption.length)
    return code ? { ...OPAQUE(), nested: interpreterCommands(code) } : OPAQUE()
  }
}

/** A string literal of Python, JavaScript, Perl or Ruby: single or double quotes, backslash escapes. */
const SCRIPT_STRING = String.raw`(?:"((?:[^"\\\n]|\\.)*)"|'((?:[^'\\\n]|\\.)*)')`
/** A list of string literals: `["rm", "-rf", "/"]`, a program and its arguments (no shell between). */
const SCRIPT_LIST = String.raw`\[\s*(${SCRIPT_STRING}(?:\s*,\s*${SCRIPT_STRING})*)\s*,?\s*\]`
/**
 * Where code hands a literal string to a shell: Python's os.system, os.popen, subprocess's getoutput and, with
 * shell=True, run, call, check_call, check_output and Popen; Node's child_process exec and execSync; Perl's and Ruby's system and exec with
 * one string, backquotes, qx and %x.
 */
const SHELL_CALLS = [
  String.raw`\bos\.(?:system|popen)\s*\(\s*`,
  String.raw`\bsubprocess\.(?:getoutput|getstatusoutput)\s*\(\s*`,
  String.raw`\b(?:execSync|exec)\s*\(\s*`,
  String.raw`\b(?:system|exec)\s*\(?\s*`,
].map((call) => new RegExp(`${call}${SCRIPT_STRING}\\s*(?:[),;}]|$)`, "gm"))
/** subprocess with shell=True: its first string is a shell command line. */
const SUBPROCESS_SHELL = new RegExp(
  String.raw`\bsubprocess\.(?:run|call|check_call|check_output|Popen)\s*\(\s*${SCRIPT_STRING}[^)]*\bshell\s*=\s*True`,
  "g",
)
/** A program run with its arguments as a list: subprocess.run([...]), execFileSync("rm", [...]), system("rm", ...). */
const LIST_CALLS = [
  new RegExp(String.raw`\bsubprocess\.(?:run|call|check_call|check_output|Popen)\s*\(\s*${SCRIPT_LIST}`, "g"),
  new RegExp(String.raw`\bos\.exec[lv]p?e?\s*\(\s*${SCRIPT_STRING}\s*,\s*${SCRIPT_LIST}`, "g"),
  new RegExp(String.raw`\b(?:execFileSync|execFile|spawnSync|spawn)\s*\(\s*${SCRIPT_STRING}\s*,\s*${SCRIPT_LIST}`, "g"),
]
/** Perl's and Ruby's system and exec with a list of strings: `system("rm", "-rf", "/")`, a program and its arguments. */
const WORD_LIST_CALL = new RegExp(
  String.raw`\b(?:system|exec)\s*\(?\s*(${SCRIPT_STRING}(?:\s*,\s*${SCRIPT_STRING})+)`,
  "g",
)
/** Backquotes (Perl, Ruby), qx and %x with a literal command: `` `rm -rf x` ``, `qx(rm -rf x)`, `%x(rm -rf x)`. */
const QUOTED_COMMANDS = /`([^`\n]+)`|\b(?:qx|%x)\s*[({]([^)}\n]+)[)}]/g

/**
 * The shell command lines a script runs from literal strings (`os.system("rm -rf /")`,
 * `child_process.execSync('git push -f')`, `system "rm -rf x"`, `subprocess.run(["rm", "-rf", "/"])`,
 * `system("rm", "-rf", "/")`), read like
 * `sh -c`'s code; a command built at run time (`os.system(cmd)`, an f-string's fields) is not known and is not read.
 */
export function interpreterCommands(code: string): string[] {
  if (!/system|exec|popen|subprocess|spawn|getoutput|`|qx|%x/.test(code)) return NO_WORDS
  const found: string[] = []
  const text = (m: RegExpMatchArray, from: number) => unescapeBackslashes(m[from] ?? m[from + 1] ?? "")
  for (const pattern of [...SHELL_CALLS, SUBPROCESS_SHELL])
    for (const m of code.matchAll(pattern)) found.push(text(m, 1))
  for (const pattern of LIST_CALLS)
    for (const m of code.matchAll(pattern)) {
      const list = m[0].slice(m[0].lastIndexOf("[") + 1, m[0].lastIndexOf("]"))
      const head = pattern === LIST_CALLS[0] ? [] : [text(m, 1)]
      const words = [...head, ...[...list.matchAll(new RegExp(SCRIPT_STRING, "g"))].map((w) => text(w, 1))]
      // os.execvp("rm", ["rm", ...]) repeats the program as argv[0]
      if (head.length && words[1] === words[0]) words.splice(1, 1)
      found.push(words.map(shellWord).join(" "))
    }
  for (const m of code.matchAll(WORD_LIST_CALL))
    found.push([...m[1].matchAll(new RegExp(SCRIPT_STRING, "g"))].map((w) => shellWord(text(w, 1))).join(" "))
  for (const m of code.matchAll(QUOTED_COMMANDS)) found.push(m[1] ?? m[2])
  return found
}

/**
 * `perl [-n|-p] [-i[EXT]] [-e CODE]... [PROGRAM] [FILE...]`: with -i the files are written in place. A perl program
 * can do anything (opaque); `perl -ne`/`-pe` without -i is a filter that only prints, unless its code names a
 * function that writes or runs (PERL_EFFECTS).
 */
const readPerl: ProgramReader = (args) => {
  const parsed = getopt(args, { values: "eEIMm", optional: "iFxCdD", numeric: "l0" })
  const code = values(parsed, "e", "E")
  const operands = [...parsed.operands]
  const programFile = code.length === 0 ? operands.shift() : undefined
  const inPlace = has(parsed, "i")
  const filter = has(parsed, "n", "p") && programFile === undefined && !has(parsed, "M", "m") // a module can do anything
  return reading({
    writes: inPlace ? operands.map((word) => ({ word, throughLinks: false })) : [],
    reads: [...(inPlace ? [] : operands), ...(programFile ? [programFile] : [])],
    changing: inPlace || !filter || code.some((text) => PERL_EFFECTS.test(text)),
    opaque: true,
    nested: code.flatMap(interpreterCommands),
  })
}

/** `dd if=FILE of=FILE`: of= is written. */
const readDd: ProgramReader = (args) =>
  reading({
    writes: args.filter((arg) => arg.startsWith("of=")).map((arg) => ({ word: arg.slice(3), throughLinks: true })),
    reads: args.filter((arg) => arg.startsWith("if=")).map((arg) => arg.slice(3)),
    changing: true,
  })

/** One reader for each name in a blank-separated list. */
function each(names: string, reader: ProgramReader): Record<string, ProgramReader> {
  return Object.fromEntries(names.split(/\s+/).map((name) => [name, reader]))
}

/**
 * The table: each program and what it does with its arguments. A program not listed is opaque (a changing step; a
 * guard name anywhere in the command blocks). docs/contracts.md summarises it ("How bash commands are read", "What
 * counts as a changing step").
 */
const PROGRAMS: Record<string, ProgramReader> = {
  // print or look up: the words are text
  ...each("echo printf true false : test [ [[ date sleep wait pwd which whereis type whoami id uname hostname", prints),
  ...each("printenv basename dirname seq expr tr", prints),
  // only read: every operand a file read
  ...each("cat head tail wc ls less more diff cmp comm du df realpath readlink nl cut column jq file stat", readsFiles),
  ...each("sha1sum sha256sum md5sum cksum od hexdump xxd strings bat tac rev fold paste cd pushd popd ps", readsFiles),
  ...each("grep egrep fgrep", searches({ values: "efmABCdD", long: ["regexp", "file", "max-count", "context"] })),
  ...each("rg ag ack", searches({ values: "efgtTmABCjMEr", long: ["regexp", "file", "glob", "type", "replace"] })),
  sort: writesOutput({ values: "kotST", long: ["output", "key", "field-separator"] }, (p) => [
    values(p, "o", "output"),
    p.operands,
  ]),
  uniq: writesOutput({ values: "fsw" }, (p) => [p.operands.slice(1, 2), p.operands.slice(0, 1)]),
  tree: writesOutput({ values: "LPIoH" }, (p) => [values(p, "o"), p.operands]),
  // scripts and patterns: text; only the file operands are read or written
  sed: readSed,
  ...each("awk gawk mawk nawk", readAwk),
  perl: readPerl,
  ...each("python python3 python2", interpreter("-c")),
  ...each("node nodejs ruby", interpreter("-e")),
  find: readFind,
  git: readGit,
  // change: the operands are written (created, changed, moved or deleted)
  ...each("rm unlink", writesFiles()),
  rmdir: writesFiles({}, false, true), // removes empty directories only: never one that holds a guard file
  mkdir: writesFiles({ values: "m" }, false, true),
  touch: writesFiles({ values: "dtr" }, false, true),
  truncate: writesFiles({ values: "sr" }, true),
  shred: writesFiles({ values: "ns" }, true),
  tee: writesFiles({}, true),
  ...each("chmod chown chgrp", modeThenFiles),
  mv: copies({ values: "tS", long: ["target-directory", "suffix"] }, false, true),
  cp: copies({ values: "tS", long: ["target-directory", "suffix"] }, true),
  install: copies({ values: "tSmog", long: ["target-directory", "suffix", "mode", "owner", "group"] }, true),
  rsync: copies({ values: "efBT", long: ["rsh", "filter", "exclude", "include"] }, false),
  ln: links,
  dd: readDd,
  // run another command: read that one
  sudo: wrapper("ugCDhprtTU"),
  nice: wrapper("n"),
  ...each("nohup time exec", wrapper("a")),
  timeout: wrapper("sk", 1),
  stdbuf: wrapper("ioe"),
  setsid: wrapper(""),
  ionice: wrapper("cnp"),
  // `watch [-n SECONDS] COMMAND...` hands its words to `sh -c` as one line; with -x/--exec it runs them as they are
  watch: (args, _stdin, depth) => {
    const rest = afterOptions(args, "nq")
    const own = args.slice(0, args.length - rest.length)
    if (rest.length === 0) return reading()
    const exec = own.some((arg) => arg === "--exec" || /^-[a-zA-Z]*x/.test(arg))
    if (!exec && !rest.some((word) => /[\s'"\\$`;&|<>()]/.test(word)))
      return reading({ nested: [rest.join(" ")], reads: own })
    const inner = readSimple(rest, [], depth + 1)
    // words a shell would split differently (`watch sh -c 'git reset --hard'`): read as they are too, as with -x
    const nested = exec ? inner.nested : [...inner.nested, rest.join(" ")]
    return { ...inner, nested, reads: [...own, ...inner.reads] }
  },
  xargs: readXargs,
  // `busybox APPLET ARG...` is that applet (`busybox rm -rf /tmp/x` is rm); `busybox --list` prints
  busybox: (args, stdin, depth) =>
    args.length && !args[0].startsWith("-") ? readSimple(args, stdin, depth + 1) : reading(),
  env: (args, stdin, depth) =>
    args.some((arg) => arg === "-S" || arg.startsWith("--split-string")) ? OPAQUE() : wrapper("uC")(args, stdin, depth),
  command: (args, stdin, depth) =>
    args.some((arg) => /^-[vV]$/.test(arg)) ? reading() : wrapper("")(args, stdin, depth),
  ...each("bash sh zsh dash ksh", shell),
  eval: (args) => reading({ nested: [args.join(" ")] }),
  // `builtin NAME ARG...` runs the shell's own NAME (`builtin eval CODE`, `builtin cd DIR`)
  builtin: wrapper(""),
  parallel: readParallel,
}

/** PROGRAMS as a Map: looked up once per simple command of every bash call. */
export const PROGRAM_READERS = new Map(Object.entries(PROGRAMS))

/** Shell words that open or close a compound command; the command after them is read. */
const SHELL_KEYWORDS = new Set(["!", "{", "}", "if", "then", "else", "elif", "fi", "do", "done", "while", "until"])
/** Shell words whose following words are a list of values (`for f in ...`, `case $x in ...`): they are read. */
const LIST_KEYWORDS = new Set(["for", "case", "select", "in", "esac"])
/**
 * Variables whose value is a command that a program runs without a terminal, and the programs that run it:
 * `GIT_EXTERNAL_DIFF='rm -rf x' git diff` runs `rm -rf x`. Such a value is read as a command line when the command's
 * program is one of these (`GIT_EDITOR=true git commit` stays what git commit is; `EDITOR=vim ls` is ls). Pagers
 * (GIT_PAGER, PAGER) are not here: they run only when the output is a terminal, and opencode's bash tool has none.
 */
const COMMAND_VARIABLES: ReadonlyMap<string, ReadonlySet<string>> = (() => {
  const git = new Set(["git"])
  const editing = new Set(["git", "crontab", "visudo", "sudoedit", "vipw", "vigr", "edquota", "fc"])
  const ssh = new Set(["git", "ssh", "scp", "sftp", "rsync"])
  return new Map([
    ...["GIT_EXTERNAL_DIFF", "GIT_SSH", "GIT_SSH_COMMAND", "GIT_EDITOR", "GIT_SEQUENCE_EDITOR", "GIT_ASKPASS"].map(
      (name) => [name, git] as const,
    ),
    ...["EDITOR", "VISUAL"].map((name) => [name, editing] as const),
    ["SSH_ASKPASS", ssh] as const,
  ])
})()
/** git config given in the environment (as `git -c`): git is then no read-only command, and the values are read. */
const GIT_CONFIG_VARIABLE = /^GIT_CONFIG_(?:PARAMETERS|COUNT|KEY_\d+|VALUE_\d+)$/
/** A program word that is a variable holding a shell: `$SHELL`, `${SHELL}`, `$BASH`, `${BASH}`. */
const SHELL_VARIABLE = /^\$(?:SHELL|BASH|\{(?:SHELL|BASH)\})$/
/** The shells the reader follows (`bash -c`, `sh <<EOF`): their start-up files are code too. */
const SHELLS = new Set(["bash", "sh", "zsh", "dash", "ksh"])
/** Variables that make a program load code from a file (a library, a start-up script): what runs is not known. */
const CODE_VARIABLES = new Set(["LD_PRELOAD", "LD_AUDIT", "BASH_ENV", "NODE_OPTIONS", "PERL5OPT"])

/**
 * What one simple command does: its program looked up in PROGRAMS after variable assignments and shell keywords.
 * `depth` counts the commands it runs through (`sudo nice timeout 5 ...`): past MAX_PREFIXES it is opaque.
 */
function readSimple(words: string[], stdin: string[], depth = 0): Reading {
  if (depth > MAX_PREFIXES) {
    recordRan(words, 0, stdin, true)
    return OPAQUE()
  }
  // A variable's value (`d=.opencode; rm -rf $d`) and a loop's words (`for f in .opencode/*`) may be paths the
  // command goes on to use: they are read, so a guard name there counts when the command changes something.
  let values = NO_WORDS
  let names = NO_WORDS // the variables assigned, in order with their values
  let i = 0
  for (; i < words.length; i++) {
    const assignment = words[i].includes("=") ? /^([A-Za-z_][A-Za-z0-9_]*)=/.exec(words[i]) : null
    if (assignment) {
      if (values === NO_WORDS) [values, names] = [[], []]
      values.push(words[i].slice(assignment[0].length))
      names.push(assignment[1])
    } else if (!SHELL_KEYWORDS.has(words[i])) break
  }
  if (i === words.length || LIST_KEYWORDS.has(words[i])) return reading({ reads: [...values, ...words.slice(i)] })
  const word = words[i]
  // a program named with blanks in it and no directory (`"$1"` given 'git reset --hard'): no such program, nothing
  // runs; a path may hold blanks (`"/c/Program Files/Git/bin/git"`), so one with a slash is read as before
  if (/\s/.test(word) && !/[/\\]/.test(word)) {
    recordRan(words, i, stdin, false)
    return reading({ reads: values })
  }
  const program = SHELL_VARIABLE.test(word)
    ? "bash" // `$SHELL -c CODE`, `${BASH} -s`: the user's shell, a shell all the same
    : word[0] === "/"
      ? word.replace(/^\/(?:usr\/(?:local\/)?)?s?bin\//, "") // /usr/bin/sed is sed; ./bin/test is not test
      : windowsName(word)
  const reader = PROGRAM_READERS.get(program)
  ranVia.push(program) // the commands its reader finds it running are run "after" it
  // a shell's start-up file (`BASH_ENV=f bash x.sh`, `ENV=f sh`) written on this line is read as its code
  const startup =
    values.length > 0 && SHELLS.has(program) ? values.filter((_, k) => /^(BASH_)?ENV$/.test(names[k])) : NO_WORDS
  const loadsCode = values.length > 0 && names.some((name) => CODE_VARIABLES.has(name) && !startup.length)
  if (program === "git" && values.length > 0 && names.some((name) => GIT_CONFIG_VARIABLE.test(name)))
    gitEnvConfig = gitConfigFromEnv(names, values)
  let one = reader && !loadsCode ? reader(words.slice(i + 1), stdin, depth) : OPAQUE()
  gitEnvConfig = NO_WORDS
  if (startup.length && !loadsCode) {
    const code = startupCode(startup, OPAQUE())
    one = code.opaque ? OPAQUE() : { ...one, nested: [...code.nested, ...one.nested], changing: true }
  }
  ranVia.pop()
  // Recorded after its reader, so a wrapper's inner command comes first; code that only prints (an awk or perl
  // filter) is followed enough: it runs nothing.
  recordRan(words, i, stdin, one.opaque && one.changing)
  if (one.unread) ranSink[ranSink.length - 1].unread = true
  if (values.length === 0) return one
  const commands = values.filter((_, k) => COMMAND_VARIABLES.get(names[k])?.has(program))
  const setsGitConfig = program === "git" && names.some((name) => GIT_CONFIG_VARIABLE.test(name))
  return {
    ...one,
    reads: [...values, ...one.reads],
    nested: commands.length ? [...one.nested, ...commands] : one.nested,
    changing: one.changing || setsGitConfig,
  }
}

/** A reading's commands by program, and its opaque ones: made once per reading (every command rule of a call asks). */
export type RanIndex = { byProgram: Map<string, RanCommand[]>; opaqueRan: RanCommand[]; keys: Set<string> }

/** A whole command line read: every simple command's reading (nested code included) and the redirect targets;
 * `ran`: every simple command it would run, for the command patterns (`runs:`). */
export type CommandReading = {
  readings: Reading[]
  redirects: string[]
  changing: boolean
  opaque: boolean
  ran: RanCommand[]
  index?: RanIndex // `ran` by program, made the first time a command rule asks (ranIndex)
  cwds?: (readonly string[] | undefined)[] // by reading: the line's `cd`s before it, where its paths resolve
}

/**
 * One simple command a call would run: `words[start]` is its program (as written: `/usr/bin/git`), the words after it
 * its arguments; `stdin` its here-documents; `via` the wrappers and code it runs inside, outermost first
 * (`sudo`, `bash -c`); `opaque`: it runs code the reader does not follow (an unknown program, `python3 -c`, `ssh`).
 */
export type RanCommand = {
  words: string[]
  start: number
  program: string // the program's name without its path: `git` for `/usr/bin/git`
  stdin: string[]
  via: string[]
  cwd: string[] // the `cd DIR` before it on the line, in order: where its relative paths resolve (path patterns)
  found?: readonly string[] // run by `find ROOT... -exec`: its roots, what `{}` stands for (with what lies under them)
  opaque: boolean
  unread?: boolean // the words it runs are given elsewhere (Reading's `unread`): it names every pattern
  args?: string[] // the words after the program, made the first time a pattern's program is this one
  code?: string // opaqueText, made the first time a pattern asks
  inputs?: readonly string[] // the files `<` feeds its simple command
}

// Where readSimple records the commands it finds, at any depth of wrappers (`sudo timeout 5 git ...`): set by
// readCommandAt for the line it reads. Threading a list through every ProgramReader would touch each of them for a
// concern only the command patterns have; the reading is synchronous, so one list at a time is in use.
let ranSink: RanCommand[] = []
const ranVia: string[] = [] // the programs (and shells' code) the command being read runs inside, outermost first
const ranCd: string[] = [] // the directories `cd` went to earlier on the line being read (and the lines around it)
let ranFound: readonly string[] = NO_WORDS // the roots of the `find` whose -exec command is being read
let ranInputs: readonly string[] = NO_WORDS // the files `<` feeds the simple command being read

function recordRan(words: string[], start: number, stdin: string[], opaque: boolean): void {
  const via = ranVia.length ? ranVia.slice() : NO_WORDS
  const cwd = ranCd.length ? ranCd.slice() : NO_WORDS
  const ran: RanCommand = { words, start, program: programName(words[start]), stdin, via, cwd, opaque }
  if (ranFound.length) ran.found = ranFound
  if (ranInputs.length) ran.inputs = ranInputs
  ranSink.push(ran)
}

/** A program word without its directory: `/usr/bin/git` -> `git`. */
export function programName(word: string): string {
  const slash = word.lastIndexOf("/")
  return windowsName(slash < 0 ? word : word.slice(slash + 1))
}

/**
 * A program as Windows names it, as the program it is: opencode runs there too, where `git.exe`, `GIT.EXE` and
 * `C:\Program Files\Git\bin\git.exe` are git and a file system that ignores case makes `RM` rm. Other words as they are.
 */
function windowsName(word: string): string {
  if (!mayBeWindowsName(word)) return word
  const name = word.slice(word.lastIndexOf("\\") + 1).replace(/\.(?:exe|com)$/i, "")
  return name.toLowerCase()
}
/** An upper-case letter, a backslash or `.exe` at the end: tested by code, once per program word of every call. */
function mayBeWindowsName(word: string): boolean {
  for (let i = 0; i < word.length; i++) {
    const code = word.charCodeAt(i)
    if ((code >= 65 && code <= 90) || code === 92) return true
  }
  return word.endsWith(".exe")
}

// One entry: guard-integrity and the changing-step check (per state contract, and again when the call is counted)
// read the same command of one call.
let lastCommand: string | undefined
let lastReading: CommandReading | undefined

export function readCommand(command: string): CommandReading {
  if (lastReading === undefined || lastCommand !== command) {
    // a line is read from the top: no wrapper or cd of an earlier reading (one cut short by a throw) carries over
    ranVia.length = 0
    ranCd.length = 0
    ranFound = NO_WORDS
    gitEnvConfig = NO_WORDS
    if (lineFiles.size) lineFiles.clear()
    lastReading = readCommandAt(command, 0)
    lastCommand = command
  }
  return lastReading
}

export function readCommandAt(command: string, depth: number): CommandReading {
  const scan = scanCommand(command, depth)
  if (scan === null) {
    // a line it cannot follow (an unclosed quote, too deep): its whole text is opaque code
    const ran = [
      {
        words: [command],
        start: 0,
        program: "",
        stdin: NO_WORDS,
        via: ranVia.length ? ranVia.slice() : NO_WORDS,
        cwd: NO_WORDS,
        opaque: true,
      },
    ]
    return { readings: [], redirects: [], changing: true, opaque: true, ran }
  }
  const result: CommandReading = {
    readings: [],
    redirects: [],
    changing: scan.substituted,
    opaque: scan.substituted,
    ran: [],
  }
  const outerSink = ranSink
  const outerInputs = ranInputs // a line read inside a simple command (`sudo nc h < f` wraps nothing, `$(...)` may)
  const outerCd = ranCd.length // a `cd` inside this line (`bash -c 'cd x && ...'`) ends with it
  const cdGroups: number[] = [] // the subshell depth of each `cd` of this line: it ends with its subshell
  ranSink = result.ran
  try {
    for (const [k, simple] of scan.commands.entries()) {
      while (cdGroups.length && cdGroups[cdGroups.length - 1] > simple.group) {
        cdGroups.pop()
        ranCd.pop()
      }
      if (simple.redirects.length) {
        for (const target of simple.redirects) result.redirects.push(target)
        result.changing = true
      }
      if (simple.heredocs.length) noteLineFiles(simple)
      if (simple.words.length === 0) continue
      const ranBefore = result.ran.length
      ranInputs = simple.inputs ?? NO_WORDS
      const one = readSimple(simple.words, simple.heredocs)
      // where its paths resolve: after the line's `cd`s
      if (ranCd.length && one.writes.length) (result.cwds ??= [])[result.readings.length] = ranCd.slice()
      result.readings.push(one)
      result.changing ||= one.changing
      result.opaque ||= one.opaque
      // the code a command runs (`bash -c CODE`) is run inside the program recorded last for it: the outermost
      const runner = result.ran.length > ranBefore ? result.ran[result.ran.length - 1] : undefined
      const inside = runner ? `${runner.program}'s code` : "code"
      if (runner && (runner.program === "cd" || runner.program === "pushd")) {
        const before = ranCd.length
        changeDirectory(ranArgs(runner))
        if (ranCd.length > before) cdGroups.push(simple.group)
      }
      for (const code of one.nested) readNestedInto(result, code, depth, inside)
      // a shell reading code from a pipe (`cat <<EOF | sh`): the line's here-documents may be that code, and so may
      // any word of the line (`echo 'git push -f' | sh`): the whole line is the code it runs, for the patterns
      if (one.codeFromPipe) {
        if (runner) runner.code = capText(command, REGEX_INPUT_CAP)
        // what the command before it prints into the pipe, when that is written on the line (`printf 'x\n' | sh`)
        const printed = k > 0 && scan.commands[k - 1].pipe ? printedText(scan.commands[k - 1].words) : undefined
        if (printed !== undefined) readNestedInto(result, printed, depth, inside)
        for (const other of scan.commands)
          for (const code of other.heredocs) readNestedInto(result, code, depth, inside)
      }
    }
  } finally {
    ranSink = outerSink
    ranInputs = outerInputs
    ranCd.length = outerCd
  }
  return result
}

/**
 * What `echo` or `printf` writes to its output, when its words say it (`echo -e 'a\nb'`, `printf '%s\n' x y`); undefined
 * for any other program or for `printf -v` (which writes to a variable). Bash's echo expands backslash escapes only
 * with -e; printf always expands them in its format, and in `%b` arguments; its format is reused until the arguments
 * are used up.
 */
export function printedText(words: readonly string[]): string | undefined {
  const program = words.length ? programName(words[0]) : ""
  if (program === "echo") {
    let i = 1
    let escapes = false
    for (; i < words.length && /^-[neE]+$/.test(words[i]); i++) if (words[i].includes("e")) escapes = true
    const text = words.slice(i).join(" ")
    return escapes ? unescapeBackslashes(text) : text
  }
  if (program !== "printf") return undefined
  const args = words.slice(1)
  if (args[0] === "--") args.shift()
  if (args.length === 0 || args[0].startsWith("-v")) return undefined
  const format = unescapeBackslashes(args[0])
  const rest = args.slice(1)
  let out = ""
  let used = 0
  do {
    out += format.replace(/%(%|[-+ #0-9.]*[a-zA-Z])/g, (_spec, kind: string) => {
      if (kind === "%") return "%"
      const value = rest[used++] ?? ""
      return kind.endsWith("b") ? unescapeBackslashes(value) : value
    })
  } while (used > 0 && used < rest.length)
  return out
}

/** `\n`, `\t`, `\\`, `\xHH`, `\0NNN` and the like, as echo -e and printf read them. */
function unescapeBackslashes(text: string): string {
  if (!text.includes("\\")) return text
  const simple: Record<string, string> = { n: "\n", t: "\t", r: "\r", a: "\x07", b: "\b", f: "\f", v: "\v", e: "\x1b" }
  return text.replace(/\\(x[0-9a-fA-F]{1,2}|0[0-7]{0,3}|[0-7]{1,3}|.)/g, (all, code: string) => {
    if (code[0] === "x") return String.fromCharCode(parseInt(code.slice(1), 16))
    if (/^[0-7]/.test(code)) return String.fromCharCode(parseInt(code, 8) & 0xff)
    return simple[code] ?? (code === "\\" ? "\\" : all)
  })
}

/** `cd DIR` for the commands after it on the line: `cd` alone goes home; `cd -` (the last directory) is not followed. */
function changeDirectory(args: readonly string[]): void {
  const operands = args.filter((arg) => !arg.startsWith("-") || arg === "-")
  if (operands[0] === "-") return
  ranCd.push(operands[0] ?? "~")
}

/** Reads shell code a command runs (`bash -c CODE`) and adds what it does to the line's reading. */
function readNestedInto(result: CommandReading, code: string, depth: number, inside: string): void {
  ranVia.push(inside)
  const inner = readCommandAt(code, depth + 1)
  ranVia.pop()
  for (let k = 0; k < inner.readings.length; k++) {
    if (inner.cwds?.[k]) (result.cwds ??= [])[result.readings.length] = inner.cwds[k]
    result.readings.push(inner.readings[k])
  }
  for (const target of inner.redirects) result.redirects.push(target)
  for (const ran of inner.ran) result.ran.push(ran)
  result.changing ||= inner.changing
  result.opaque ||= inner.opaque
}

/**
 * Whether a bash command only looks around (lists, reads, searches, asks git what is there) and so is not a changing
 * step: nothing in it writes a file (no output redirection other than to /dev/null or a descriptor) and no program
 * in it changes anything or runs code this reader does not follow. A false count asks the human once too often, a
 * missed one lets a change through unconfirmed: anything unknown counts.
 */
export function isReadOnlyCommand(command: string): boolean {
  const read = readCommand(command)
  return !read.changing && read.readings.length > 0 // an empty command: the classifier cannot tell, so it counts
}

/** The words after a command's program, made once per command (every pattern on its program asks). */
export function ranArgs(ran: RanCommand): string[] {
  ran.args ??= ran.start + 1 === ran.words.length ? NO_WORDS : ran.words.slice(ran.start + 1)
  return ran.args
}

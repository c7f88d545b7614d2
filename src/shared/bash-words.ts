/**
 * Getopt and the readers most programs share: prints, reads files, writes files, copies, searches (`getopt`,
 * `Reading`).
 */
import { NO_WORDS } from "./bash-scan"

/**
 * What one simple command does with its words. `writes`: what it creates, changes, moves or deletes (with
 * `throughLinks` when it writes through a symbolic link to its target; with `filter` for `find`, whose tests say
 * which paths under the root it reaches); `reads`: files it only reads; `nested`: shell code it runs, read like a
 * command line (`bash -c`, `eval`, `sh <<EOF`); `changing`: a changing step; `opaque`: it runs code this reader does
 * not follow.
 */
export type Target = {
  word: string
  throughLinks: boolean
  filter?: (findPath: string) => boolean
  // cp, install, rsync, mv's destination: when it is a directory, each source lands in it under its own name (`cp
  // notes.txt $P/` writes `$P/notes.txt`, not the project); mkdir's, touch's and rmdir's operand (no sources):
  // creating one never removes what it holds (`mkdir -p $P`), rmdir removes only an empty one. Either writes a
  // directory that holds guard files only by these names (onlyInto).
  into?: readonly string[]
}
export type Reading = {
  writes: Target[]
  reads: string[]
  nested: string[]
  changing: boolean
  opaque: boolean
  lists?: Target[] // what it prints as paths, when that is narrower than its reads (find: what its tests select)
  unread?: boolean // it runs words given elsewhere (a git alias from a file, a `$1` nothing sets): it may be anything
  codeFromPipe?: boolean // a shell that runs what it reads from a pipe: the line's here-documents may be that code
}
export type ProgramReader = (args: string[], stdin: string[], depth: number) => Reading

/** The lists a reading has when its reader gave none: shared, never written to (a reader that adds to a list makes
 * its own: `reading({ writes: [] })`). */
const NO_TARGETS: Target[] = Object.freeze([]) as unknown as Target[]

export function reading(part: Partial<Reading> = {}): Reading {
  // Built field by field, not spread: a bash call makes several, and the spread was a tenth of its reading's time.
  const one: Reading = {
    writes: part.writes ?? NO_TARGETS,
    reads: part.reads ?? NO_WORDS,
    nested: part.nested ?? NO_WORDS,
    changing: part.changing ?? false,
    opaque: part.opaque ?? false,
  }
  if (part.lists) one.lists = part.lists
  if (part.codeFromPipe) one.codeFromPipe = true
  return one
}
/** The readings most programs get (an unknown program; one that only prints): shared, never written to. */
const OPAQUE_READING: Reading = Object.freeze(reading({ changing: true, opaque: true }))
export const NOTHING_READ: Reading = Object.freeze(reading())
export const OPAQUE = (): Reading => OPAQUE_READING

/** Options and operands the way getopt splits them. `values`: short options that take a value (the rest of the
 * cluster, or the next word); `optional`: short options whose value can only be attached (`-i.bak`); `numeric`:
 * short options whose attached value is only a number, the cluster going on after it (perl's `-l0ne`); `long`: long
 * options that take the next word when written without `=`. `--` ends the options; options may follow operands. */
export type OptionSpec = { values?: string; optional?: string; numeric?: string; long?: string[] }
type Getopt = { options: Map<string, string[]>; operands: string[] }

export function getopt(args: readonly string[], spec: OptionSpec = {}): Getopt {
  const options = new Map<string, string[]>()
  const operands: string[] = []
  for (let k = 0; k < args.length; k++) {
    const arg = args[k]
    if (arg === "--") {
      operands.push(...args.slice(k + 1))
      break
    }
    if (arg.startsWith("--")) {
      const eq = arg.indexOf("=")
      const name = arg.slice(2, eq === -1 ? undefined : eq)
      if (eq !== -1) addOption(options, name, arg.slice(eq + 1))
      else if (spec.long?.includes(name)) addOption(options, name, args[++k] ?? "")
      else addOption(options, name, "")
    } else if (arg.length < 2 || arg[0] !== "-") operands.push(arg)
    else {
      for (let c = 1; c < arg.length; c++) {
        const letter = arg[c]
        if (spec.values?.includes(letter)) {
          addOption(options, letter, c + 1 < arg.length ? arg.slice(c + 1) : (args[++k] ?? ""))
          break
        }
        if (spec.optional?.includes(letter)) {
          addOption(options, letter, arg.slice(c + 1))
          break
        }
        if (spec.numeric?.includes(letter)) {
          const number = /^(?:x[0-9a-fA-F]*|[0-9]*)/.exec(arg.slice(c + 1))?.[0] ?? ""
          addOption(options, letter, number)
          c += number.length
          continue
        }
        addOption(options, letter, "")
      }
    }
  }
  return { options, operands }
}

function addOption(options: Map<string, string[]>, name: string, value: string): void {
  const list = options.get(name)
  if (list) list.push(value)
  else options.set(name, [value])
}

/** Whether an option was given, under either of its names (`-i`, `--in-place`). */
export function has(parsed: Getopt, name: string, alias?: string): boolean {
  return parsed.options.has(name) || (alias !== undefined && parsed.options.has(alias))
}

/** The values an option was given, under its first name and then its other (`-e`, `--expression`): a new list. */
export function values(parsed: Getopt, name: string, alias?: string): string[] {
  const out: string[] = []
  for (const value of parsed.options.get(name) ?? NO_WORDS) out.push(value)
  if (alias !== undefined) for (const value of parsed.options.get(alias) ?? NO_WORDS) out.push(value)
  return out
}

/** The words after a prefix program's own options (`sudo -u x`, `nice -n 5`): the command it runs. */
export function afterOptions(
  args: readonly string[],
  valueLetters: string,
  longValues: readonly string[] = NO_WORDS,
): string[] {
  let k = 0
  while (k < args.length && args[k].startsWith("-") && args[k] !== "-") {
    const arg = args[k++]
    if (arg === "--") break
    if (!arg.startsWith("--") && arg.length === 2 && valueLetters.includes(arg[1])) k++
    else if (arg.startsWith("--") && !arg.includes("=") && longValues.includes(arg.slice(2))) k++ // `--jobs 4`
  }
  return args.slice(k)
}

// Readers for the shapes most programs share.

/** Programs that print or look something up: their words are text (`echo`, `test`, `which`). */
export const prints: ProgramReader = () => NOTHING_READ

/** Programs that only read: every operand a file it reads (`cat`, `ls`, `diff`). */
export const readsFiles: ProgramReader = (args) => reading({ reads: getopt(args).operands })

/** Programs whose every operand is written (`rm`, `mkdir`, `touch`, `tee`); `creates`: it only creates (mkdir). */
export function writesFiles(spec: OptionSpec = {}, throughLinks = false, creates = false): ProgramReader {
  return (args) => {
    const { operands } = getopt(args, spec)
    const into = creates ? NO_WORDS : undefined
    return reading({ writes: operands.map((word) => ({ word, throughLinks, into })), changing: true })
  }
}

/** `chmod MODE FILE...`, `chown OWNER FILE...`: the first operand is text (a mode may look like an option: -w). */
export const modeThenFiles: ProgramReader = (args) => {
  let modeSeen = args.some((arg) => arg.startsWith("--reference"))
  const files: string[] = []
  for (const arg of args) {
    if (arg.startsWith("--") || /^-[RHLPcfvh]+$/.test(arg)) continue
    if (modeSeen) files.push(arg)
    modeSeen = true
  }
  return reading({ writes: files.map((word) => ({ word, throughLinks: true })), changing: true })
}

/** `cp`, `install`, `rsync`: SOURCE... DEST, or -t DIR SOURCE...: the sources are read, DEST written; `mv`: all. */
export function copies(spec: OptionSpec, throughLinks: boolean, sourcesMove = false): ProgramReader {
  return (args) => {
    const parsed = getopt(args, spec)
    const target = values(parsed, "t", "target-directory")
    const { operands } = parsed
    let written: string[]
    let read: string[]
    if (target.length) [written, read] = [target, operands]
    else if (has(parsed, "d", "directory") && !sourcesMove)
      [written, read] = [operands, []] // install -d DIR...
    else [written, read] = [operands.slice(-1), operands.slice(0, -1)]
    // rsync --delete removes what the source lacks from the destination: it is written as a whole
    const into = args.some((arg) => /^--del(?:$|ete)/.test(arg)) ? undefined : read
    const writes: Target[] = written.map((word) => ({ word, throughLinks, into }))
    if (sourcesMove)
      return reading({ writes: [...writes, ...read.map((word) => ({ word, throughLinks }))], changing: true }) // mv: the sources go away
    return reading({ writes, reads: read, changing: true })
  }
}

/** `sort -o OUT`, `uniq IN OUT`, `tree -o OUT`: they read their inputs and write only the output file named. */
export function writesOutput(
  spec: OptionSpec,
  split: (parsed: Getopt) => [written: string[], read: string[]],
): ProgramReader {
  return (args) => {
    const [written, read] = split(getopt(args, spec))
    const writes = written.map((word) => ({ word, throughLinks: true }))
    return reading({ writes, reads: read, changing: written.length > 0 })
  }
}

/** `ln [-s] TARGET... LINK`: writes LINK (or, with one operand, a link of the same name here); TARGET is only named. */
export const links: ProgramReader = (args) => {
  const parsed = getopt(args, { values: "tS", long: ["target-directory", "suffix"] })
  const target = values(parsed, "t", "target-directory")
  const { operands } = parsed
  const written = target.length
    ? target
    : operands.length === 1
      ? [operands[0].replace(/\/+$/, "").replace(/^.*\//, "")]
      : operands.slice(-1)
  const named = target.length || operands.length === 1 ? operands : operands.slice(0, -1)
  return reading({ writes: written.map((word) => ({ word, throughLinks: false })), reads: named, changing: true })
}

/** grep, rg, ag: the pattern (the first operand, unless -e/-f give it) is text; the other operands are read. */
export function searches(spec: OptionSpec): ProgramReader {
  return (args) => {
    const parsed = getopt(args, spec)
    const patternGiven = has(parsed, "e", "regexp") || has(parsed, "f", "file")
    const files = patternGiven ? parsed.operands : parsed.operands.slice(1)
    return reading({ reads: [...files, ...values(parsed, "f", "file")] })
  }
}

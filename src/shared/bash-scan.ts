/**
 * The quote-aware scan of a bash line into simple commands, redirects and here-documents (`scanCommand`).
 */

/**
 * One simple command: its words with quotes removed, the files its redirections write, what it reads on its standard
 * input from the line itself (here-documents' bodies and here-strings); `inputs`: the files `<` feeds it; `group`: how many subshells it runs in
 * (`( ... )`, `$( ... )`), where a `cd` ends; `pipe`: its output goes to the next command (`a | b`).
 */
export type SimpleCommand = {
  words: string[]
  redirects: string[]
  heredocs: string[]
  group: number
  pipe?: true
  inputs?: string[] // the files `<` feeds it
}

/** A scanned command line; `substituted`: it has `$(...)`, backquotes or `<(...)`, whose output is not known. */
type Scan = { commands: SimpleCommand[]; substituted: boolean }

const MAX_NESTING = 4 // `bash -c` in `$(...)` in `eval` ...: deeper than this is opaque
export const MAX_PREFIXES = 16 // `sudo env nice ...` before the program: more than this is opaque

/** Where the `)` closing a `$(` or `<(` opened just before `start` is, quotes and nesting respected; -1 if none. */
export function closingParen(text: string, start: number): number {
  let depth = 1
  for (let i = start; i < text.length; i++) {
    const ch = text[i]
    if (ch === "\\") i++
    else if (ch === "'") i = text.indexOf("'", i + 1) === -1 ? text.length : text.indexOf("'", i + 1)
    else if (ch === '"') {
      for (i++; i < text.length && text[i] !== '"'; i++) if (text[i] === "\\") i++
    } else if (ch === "(") depth++
    else if (ch === ")" && --depth === 0) return i
  }
  return -1
}

/** The command lines of the `$(...)` and backquote substitutions in a word. */
export function substitutionsIn(word: string): string[] {
  const inner: string[] = []
  for (let i = 0; i < word.length; i++) {
    if (word[i] === "$" && word[i + 1] === "(" && word[i + 2] !== "(") {
      const end = closingParen(word, i + 2)
      if (end === -1) break
      inner.push(word.slice(i + 2, end))
      i = end
    } else if (word[i] === "`") {
      const end = word.indexOf("`", i + 1)
      if (end === -1) break
      inner.push(word.slice(i + 1, end))
      i = end
    }
  }
  return inner
}

/** The characters scanCommand looks at, outside quotes and inside double quotes; the others only extend a word. */
function charTable(chars: string): Uint8Array {
  const table = new Uint8Array(128)
  for (const ch of chars) table[ch.charCodeAt(0)] = 1
  return table
}
const UNQUOTED = charTable(" \t\n'\"\\`$#|;()&<>")
const IN_DOUBLE_QUOTES = charTable('"\\`$')

/** Where the run of ordinary characters from `start` ends: the next character `special` marks, or the end. */
function plainRunEnd(command: string, start: number, special: Uint8Array): number {
  let at = start
  for (; at < command.length; at++) {
    const code = command.charCodeAt(at)
    if (code < 128 && special[code]) break
  }
  return at
}

/** The arrays a SimpleCommand has until its first redirect or here-document (most have none): never written to. */
export const NO_WORDS: string[] = Object.freeze([]) as unknown as string[]

function newSimpleCommand(group = 0): SimpleCommand {
  return { words: [], redirects: NO_WORDS, heredocs: NO_WORDS, group }
}

type PendingHeredoc = { delimiter: string; stripTabs: boolean; into: SimpleCommand }

/** The simple commands of a command line, or null when it cannot be followed (an unterminated quote, too deep). */
export function scanCommand(command: string, depth = 0): Scan | null {
  if (depth > MAX_NESTING) return null
  return new LineScanner(command, depth).run()
}

/**
 * scanCommand's state while it reads one line: the word being built and the simple command it belongs to. A class,
 * not closures over locals: every bash call of every session goes through it, and the closures were a third of it.
 */
class LineScanner {
  readonly scan: Scan = { commands: [], substituted: false }
  private current: SimpleCommand = newSimpleCommand()
  private word = ""
  private inWord = false
  private group = 0 // the subshells open at this point of the line
  private readonly heredocs: PendingHeredoc[] = []

  constructor(
    private readonly command: string,
    private readonly depth: number,
  ) {}

  private endWord(): void {
    if (this.inWord) this.current.words.push(this.word)
    this.word = ""
    this.inWord = false
  }

  private endCommand(): void {
    this.endWord()
    const current = this.current
    if (current.words.length || current.redirects.length) this.scan.commands.push(current)
    else if (!this.heredocs.length || this.heredocs[this.heredocs.length - 1].into !== current) return // kept for the next
    this.current = newSimpleCommand(this.group)
  }

  private addRedirect(target: string): void {
    if (harmlessTarget(target)) return
    if (this.current.redirects === NO_WORDS) this.current.redirects = []
    this.current.redirects.push(target)
  }

  // `$(...)`, backquotes, `<(...)`, `>(...)`: the inner command is read as well; what it prints is not known.
  private substitute(inner: string): boolean {
    const nested = scanCommand(inner, this.depth + 1)
    if (!nested) return false
    for (const one of nested.commands) {
      one.group += this.group + 1 // a substitution runs in a subshell
      this.scan.commands.push(one)
    }
    this.scan.substituted = true
    return true
  }

  /** A redirection word's `$(...)` and backquote commands (redirectTarget's `subs`): read as any substitution. */
  private substituteAll(subs: string[] | undefined): boolean {
    if (subs) for (const inner of subs) if (!this.substitute(inner)) return false
    return true
  }

  /** The index of the substitution's last character, or -1 when it cannot be followed. */
  private substitution(i: number): number {
    const command = this.command
    if (command[i] === "`") {
      let end = i + 1
      while (end < command.length && command[end] !== "`") end += command[end] === "\\" ? 2 : 1
      return end < command.length && this.substitute(command.slice(i + 1, end)) ? end : -1
    }
    if (command.startsWith("$((", i)) {
      // arithmetic: its `$(...)` and backquotes run (`$(( $(git reset --hard) + 1 ))`), the rest is numbers
      const end = closingParen(command, i + 2)
      if (end === -1) return -1
      return this.substituteAll(substitutionsIn(command.slice(i + 3, end - 1))) ? end : -1
    }
    const open = command[i] === "$" || command[i] === "<" || command[i] === ">" ? i + 1 : i
    const end = closingParen(command, open + 1)
    return end !== -1 && this.substitute(command.slice(open + 1, end)) ? end : -1
  }

  run(): Scan | null {
    const command = this.command
    let quote = ""
    for (let i = 0; i < command.length; i++) {
      const ch = command[i]
      if (quote === "'") {
        // Nothing is special inside single quotes: the word takes everything up to the closing quote at once.
        const close = command.indexOf("'", i)
        this.word += command.slice(i, close === -1 ? command.length : close)
        if (close === -1) break
        quote = ""
        i = close
        continue
      }
      if (quote === '"') {
        if (ch === '"') quote = ""
        else if (ch === "\\" && i + 1 < command.length) {
          // Inside double quotes a backslash escapes only $ ` " \ and a newline; elsewhere it stays (sed needs it).
          const next = command[++i]
          if (next !== "\n") this.word += '$`"\\'.includes(next) ? next : `\\${next}`
        } else if (ch === "`" || (ch === "$" && command[i + 1] === "(")) {
          const end = this.substitution(i)
          if (end === -1) return null
          this.word += command.slice(i, end + 1)
          i = end
        } else {
          const end = plainRunEnd(command, i + 1, IN_DOUBLE_QUOTES)
          this.word += command.slice(i, end)
          i = end - 1
        }
        continue
      }
      if (ch === "'" || ch === '"') {
        quote = ch
        this.inWord = true
      } else if (ch === "\\") {
        if (command[i + 1] === "\n")
          i++ // a line continuation
        else if (i + 1 < command.length) {
          this.word += command[++i]
          this.inWord = true
        }
      } else if (ch === "`" || (ch === "$" && command[i + 1] === "(")) {
        const end = this.substitution(i)
        if (end === -1) return null
        this.word += command.slice(i, end + 1)
        this.inWord = true
        i = end
      } else if (ch === "#" && !this.inWord) {
        while (i + 1 < command.length && command[i + 1] !== "\n") i++
      } else if (ch === " " || ch === "\t") this.endWord()
      else if (ch === "\n") {
        this.endCommand()
        i = readHeredocs(command, i, this.heredocs)
      } else if (ch === "|" || ch === ";" || ch === "(" || ch === ")") {
        // `a | b` (and `a |& b`) pipes a's output into b; `a || b` does not
        this.endWord()
        if (ch === "|" && command[i + 1] !== "|" && command[i - 1] !== "|" && this.current.words.length)
          this.current.pipe = true
        this.endCommand()
        if (ch === "(") this.current.group = ++this.group
        else if (ch === ")") this.current.group = this.group = Math.max(0, this.group - 1)
      } else if (ch === "&") {
        if (command[i + 1] === ">") {
          // &> and &>> send both streams to a file
          this.endWord()
          const target = redirectTarget(command, i + (command[i + 2] === ">" ? 3 : 2))
          if (!this.substituteAll(target.subs)) return null
          this.addRedirect(target.word)
          i = target.end - 1
        } else this.endCommand()
      } else if (ch === ">") {
        // [n]>, >>, >|, n>&m: a write unless it goes to /dev/null or duplicates a descriptor; >(...) runs a command
        if (this.inWord && /^\d+$/.test(this.word)) {
          this.word = ""
          this.inWord = false
        } else this.endWord()
        if (command[i + 1] === "(") {
          const end = this.substitution(i)
          if (end === -1) return null
          i = end
          continue
        }
        let at = i + 1
        if (command[at] === ">" || command[at] === "|") at++
        const target = redirectTarget(command, at)
        if (!this.substituteAll(target.subs)) return null
        this.addRedirect(target.word)
        i = target.end - 1
      } else if (ch === "<") {
        this.endWord()
        if (command[i + 1] === "(") {
          const end = this.substitution(i)
          if (end === -1) return null
          i = end
        } else if (command[i + 1] === "<" && command[i + 2] !== "<") {
          // a here-document: its body, on the lines after this one, is the command's input, not commands
          const stripTabs = command[i + 2] === "-"
          const target = redirectTarget(command, i + (stripTabs ? 3 : 2))
          // the delimiter is the word after quote removal: `<<\EOF` and `<<'EOF'` both end at a line `EOF`
          this.heredocs.push({ delimiter: target.word.replace(/\\/g, ""), stripTabs, into: this.current })
          i = target.end - 1
        } else {
          let at = i + 1
          while (command[at] === "<") at++
          const target = redirectTarget(command, at) // input redirection: its word is a file the command reads
          if (!this.substituteAll(target.subs)) return null
          // a here-string (`bash <<< 'rm -rf x'`) is the command's input, as a here-document's body is
          if (at === i + 3) {
            if (this.current.heredocs === NO_WORDS) this.current.heredocs = []
            this.current.heredocs.push(target.word)
          } else (this.current.inputs ??= []).push(target.word)
          i = target.end - 1
        }
      } else {
        const end = plainRunEnd(command, i + 1, UNQUOTED)
        this.word += command.slice(i, end)
        this.inWord = true
        i = end - 1
      }
    }
    if (quote) return null
    this.endCommand()
    return this.scan
  }
}

/** Reads the bodies of the here-documents opened on the line that ends at `newline`; returns the last index used. */
function readHeredocs(command: string, newline: number, pending: PendingHeredoc[]): number {
  if (pending.length === 0) return newline // most lines open none
  let at = newline
  for (const { delimiter, stripTabs, into } of pending.splice(0)) {
    // The body is the text between this line's end and the delimiter's line (or the end): found line by line,
    // cut once.
    const bodyStart = at + 1
    let bodyEnd = command.length
    while (at < command.length) {
      const lineStart = at + 1
      const newlineAt = command.indexOf("\n", lineStart)
      const lineEnd = newlineAt === -1 ? command.length : newlineAt
      let from = lineStart
      if (stripTabs) while (from < lineEnd && command[from] === "\t") from++
      at = lineEnd
      if (lineEnd - from === delimiter.length && command.startsWith(delimiter, from)) {
        bodyEnd = lineStart - 1
        break
      }
    }
    if (into.heredocs === NO_WORDS) into.heredocs = []
    into.heredocs.push(command.slice(bodyStart, Math.max(bodyStart, bodyEnd)))
  }
  return at
}

/**
 * The word after a redirection operator (blanks skipped) and where it ends, its quotes removed. A quote runs to its
 * closing quote (`>'a b'`, `` >'a`x`b' `` is one word, and nothing in single quotes runs); `subs`: the `$(...)` and
 * backquote commands outside single quotes, which the shell runs to make the word (`> "$(git reset --hard)"`).
 */
function redirectTarget(command: string, start: number): { word: string; end: number; subs?: string[] } {
  let at = start
  while (command[at] === " " || command[at] === "\t") at++
  const begin = at
  let subs: string[] | undefined
  let double = false
  for (; at < command.length; at++) {
    const ch = command[at]
    if (ch === "\\") at++
    else if (ch === "'" && !double) {
      const close = command.indexOf("'", at + 1)
      at = close === -1 ? command.length : close
    } else if (ch === '"') double = !double
    else if (ch === "`" || (ch === "$" && command[at + 1] === "(")) {
      const end = ch === "`" ? command.indexOf("`", at + 1) : closingParen(command, at + 2)
      if (end === -1) break
      ;(subs ??= []).push(command.slice(at + (ch === "`" ? 1 : 2), end))
      at = end
    } else if (!double) {
      const code = command.charCodeAt(at)
      if (code < 128 ? REDIRECT_WORD_END[code] : /\s/.test(ch)) break
    }
  }
  if (command[begin] === "&" && /\d|-/.test(command[begin + 1] ?? "")) at = Math.max(at, begin + 2)
  const word = command.slice(begin, at)
  const unquoted = word.includes("'") || word.includes('"') ? word.replace(/["']/g, "") : word
  return subs ? { word: unquoted, end: at, subs } : { word: unquoted, end: at }
}
/** What ends a redirection's word: a blank (any `\s`, beyond ASCII too) or an operator character. */
const REDIRECT_WORD_END = charTable(" \t\n\r\v\f|;&()<>")

export function harmlessTarget(target: string): boolean {
  if (target[0] === "&") return /^&(\d+|-)$/.test(target)
  return target[0] === "/" && /^\/dev\/(null|stdout|stderr|tty)$/.test(target)
}

/**
 * protect-secrets, its pure part: which files are the person's secret files, what in them (and in the environment) is
 * a secret, and a secret's removal from a tool result (`SecretMatcher`). The files are read off the call path, in
 * secret-files.ts.
 */
import { escapeRegex, relativeInside, resolvePath } from "./names"
import { TextEncoder, btoa } from "./constants"
// What a secret is (docs/contracts.md, "protect-secrets"):
//   - a value in the person's secret files: `.env` and `.env.*` in the project (not `.env.example`, `.sample`,
//     `.template`, `.dist`), private keys (a PEM block whose header says PRIVATE KEY), the credential files in the
//     home directory (SECRET_HOME_FILES, the private keys in ~/.ssh), and opencode's own auth.json and mcp-auth.json;
//   - the value of an environment variable of the opencode process whose name says it is one (isSecretName), or the
//     password of a URL in any variable.
// In a secret file, a value whose name says it is secret (`API_KEY=...`, `password = ...`, `"token": "..."`) is one
// when it could be a secret at all (isSecretValue: 8 characters or more, no number, no boolean, no path, no URL, no
// placeholder); a value under any other name is one only when it looks random (RANDOM_MIN characters or more,
// letters and digits, no blank, RANDOM_BITS of entropy a character). So `PORT=3000`, `DEBUG=true`,
// `NODE_ENV=production` and `API_URL=http://localhost:8080` are never taken for secrets. A URL's password is one
// (`postgres://app:s3cret-pass@db/app`). Each line of a private key's body is one: a key shows in pieces.
// Tune: the bounds below; a config names more secret files (`settings.secretFiles`) and values that are no secrets
// (`settings.notSecrets`).

export const SECRET_MIN = 8 // characters of the shortest value taken for a secret
const RANDOM_MIN = 16 // characters of a value that is a secret by its look alone (its name says nothing)
const RANDOM_BITS = 3.2 // Shannon entropy per character of such a value (hex keys 3.7-4, words 2.5-3.1)
const PEM_LINE_MIN = 16 // characters of a private key's body line taken for a secret (the last line is short)
const ENCODED_MIN = 12 // characters of a secret's base64 form searched for (its ends depend on the bytes around it)

/**
 * A secret and where it came from, as the model and the person read it: `.env`, `~/.aws/credentials`,
 * `$OPENAI_API_KEY`. `only`: searched as written alone (a private key's line: its base64 forms would be dozens of
 * searches per key), or in base64 alone (a private key's BEGIN line, which is no secret as written but marks the
 * whole key in `base64 id_rsa`).
 */
export type Secret = { value: string; source: string; only?: "written" | "encoded" }

/** Names that say their value is a secret (env variables, keys in a credential file). `PWD` is a directory. */
const SECRET_NAME =
  /(?:^|[_.\-\s])(?:api[_-]?key|key|keys|token|tokens|secret|secrets|password|passwd|passphrase|pass|pwd|credentials?|auth|authtoken|private[_-]?key|access[_-]?key(?:[_-]?id)?|client[_-]?secret|session[_-]?token|refresh[_-]?token|dsn|cookie|signature|salt)(?:$|[_.\-\s])|password|secret|token|apikey|_authtoken/i

export function isSecretName(name: string): boolean {
  return name !== "PWD" && name !== "OLDPWD" && SECRET_NAME.test(name)
}

const NOT_SECRET_WORD =
  /^(?:true|false|yes|no|on|off|null|none|nil|undefined|enabled|disabled|production|development)$/i
const PLACEHOLDER =
  /^(?:x+|\*+|\.+|-+|_+)$|your[-_ ]|example|changeme|change[-_]me|placeholder|replace[-_ ]?me|<[^>]*>|\$\{|\{\{/i

/** Whether a value could be a secret: long enough, and no number, boolean, path, URL or placeholder. */
export function isSecretValue(value: string, named: boolean): boolean {
  if (value.length < SECRET_MIN || value.length > 16_384) return false
  if (/^[\d.,:+-]+$/.test(value) || NOT_SECRET_WORD.test(value) || PLACEHOLDER.test(value)) return false
  if (/^(?:~|\.{0,2})\//.test(value) || /^[a-z][a-z0-9+.-]*:\/\//i.test(value)) return false
  if (named) return !/\s/.test(value) || value.length >= RANDOM_MIN // a passphrase may have blanks
  return looksRandom(value)
}

/** A value that is a secret by its look: long, letters and digits, no blank, little repetition. */
function looksRandom(value: string): boolean {
  if (value.length < RANDOM_MIN || /\s/.test(value) || !/[a-z]/i.test(value) || !/\d/.test(value)) return false
  return entropy(value) >= RANDOM_BITS
}

function entropy(text: string): number {
  const counts = new Map<string, number>()
  for (const ch of text) counts.set(ch, (counts.get(ch) ?? 0) + 1)
  let bits = 0
  for (const n of counts.values()) bits -= (n / text.length) * Math.log2(n / text.length)
  return bits
}

/** A URL's password (`scheme://user:PASSWORD@host`), each one in a text. */
const URL_PASSWORD = /[a-z][a-z0-9+.-]*:\/\/[^\s:@/'"]*:([^\s@/'"]+)@/gi

/** The secrets in the environment: variables whose name says so, and URL passwords in any. */
export function secretsOfEnv(env: Record<string, string | undefined>): Secret[] {
  const found: Secret[] = []
  for (const [name, value] of Object.entries(env)) {
    if (typeof value !== "string") continue
    if (isSecretName(name) && isSecretValue(value.trim(), true)) found.push({ value: value.trim(), source: `$${name}` })
    for (const m of value.matchAll(URL_PASSWORD)) pushPassword(found, m[1], `$${name}`)
  }
  return found
}

function pushPassword(found: Secret[], password: string, source: string): void {
  if (password.length >= SECRET_MIN && !PLACEHOLDER.test(password)) found.push({ value: password, source })
}

/**
 * The secrets in a secret file's text, whatever its format: a private key's body lines; `NAME=value` and
 * `name = value` lines (dotenv, INI, `.npmrc`, YAML), with quotes and `export` taken off; `password X` (`.netrc`);
 * `host:port:db:user:password` (`.pgpass`); a URL's password; the strings under secret names in JSON.
 */
export function secretsOfFile(text: string, source: string): Secret[] {
  const found: Secret[] = []
  let inKey = false
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim()
    if (/^-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----$/.test(line)) {
      inKey = true
      found.push({ value: line, source, only: "encoded" })
    } else if (/^-----END [A-Z0-9 ]*PRIVATE KEY-----$/.test(line)) inKey = false
    else if (inKey) {
      if (line.length >= PEM_LINE_MIN && !line.includes(":")) found.push({ value: line, source, only: "written" })
    } else secretsOfLine(line, source, found)
  }
  if (/^\s*[{[]/.test(text)) secretsOfJson(text, source, found)
  return found
}

function secretsOfLine(line: string, source: string, found: Secret[]): void {
  if (line === "" || line[0] === "#" || line[0] === ";") return
  for (const m of line.matchAll(URL_PASSWORD)) pushPassword(found, m[1], source)
  // `NAME=value` (dotenv, INI, .npmrc's `//host/:_authToken=...`), else `name: value` (YAML)
  const pair = /^(?:export\s+)?([^=\s]+)\s*=\s*(.*)$/.exec(line) ?? /^-?\s*([^:\s]+)\s*:\s*(.*)$/.exec(line)
  if (pair) {
    const value = unquote(pair[2])
    if (value && isSecretValue(value, isSecretName(pair[1]))) found.push({ value, source })
  }
  const netrc = /\bpassword\s+(\S+)/.exec(line)
  if (netrc && isSecretValue(netrc[1], true)) found.push({ value: netrc[1], source })
  const pgpass = line.split(":")
  if (pgpass.length === 5 && isSecretValue(pgpass[4], true)) found.push({ value: pgpass[4], source })
}

/** A value as dotenv reads it: quotes taken off, an unquoted value's ` # comment` dropped. */
function unquote(text: string): string {
  const value = text.trim()
  const quote = value[0]
  if ((quote === '"' || quote === "'" || quote === "`") && value.length >= 2) {
    const end = value.indexOf(quote, 1)
    return end > 0 ? value.slice(1, end) : value.slice(1)
  }
  return value.replace(/\s+#.*$/, "").replace(/,$/, "")
}

function secretsOfJson(text: string, source: string, found: Secret[]): void {
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    return // not JSON: its lines were read above
  }
  const walk = (value: unknown, key: string, depth: number): void => {
    if (depth > 8) return
    if (typeof value === "string") {
      if (value.includes("PRIVATE KEY-----")) found.push(...secretsOfFile(value, source))
      else if (isSecretValue(value, isSecretName(key))) found.push({ value, source })
    } else if (Array.isArray(value)) for (const item of value) walk(item, key, depth + 1)
    else if (value && typeof value === "object")
      for (const [name, item] of Object.entries(value as Record<string, unknown>)) walk(item, name, depth + 1)
  }
  walk(parsed, "", 0)
}

// Which files are the person's secret files ----------------------------------------------------------------------

/** The credential files in the home directory, relative to it. */
export const SECRET_HOME_FILES = [
  ".aws/credentials",
  ".aws/config",
  ".config/gcloud/application_default_credentials.json",
  ".azure/accessTokens.json",
  ".azure/msal_token_cache.json",
  ".kube/config",
  ".docker/config.json",
  ".npmrc",
  ".pypirc",
  ".netrc",
  ".pgpass",
  ".git-credentials",
]
/** opencode's own credentials, in its data directory (`$XDG_DATA_HOME/opencode`). */
export const OPENCODE_SECRET_FILES = ["auth.json", "mcp-auth.json"]

/** `.env` and `.env.*`, but not the ones meant to be shared (`.env.example`, `.env.sample.local`, ...). */
export function isEnvFileName(name: string): boolean {
  if (name !== ".env" && !name.startsWith(".env.")) return false
  return !name.split(".").some((part) => /^(?:example|sample|template|dist|defaults?|schema|tpl)$/i.test(part))
}

/** A private key's file name: `id_rsa`, `id_ed25519`, `*.pem`, `*.key` (its header decides; a `.pub` is public). */
export function isKeyFileName(name: string): boolean {
  return /^id_(?:rsa|dsa|ecdsa|ed25519)(?:_sk)?$/.test(name) || /\.(?:pem|key|p8|ppk)$/i.test(name)
}

/** A secret file's name, wherever it lies: `.env*` (not the templates) or a private key's. */
export function isSecretFileName(name: string): boolean {
  return isEnvFileName(name) || isKeyFileName(name)
}

/** A key in `~/.ssh`: `id_*`, not the `.pub` beside it. */
export function isSshKeyName(name: string): boolean {
  return name.startsWith("id_") && !name.endsWith(".pub")
}

/** Where the person's secret files are: the project, the home directory and opencode's data directory. */
export type SecretPlaces = { project: string; home: string; dataDir: string }

/** Whether an absolute path names one of the person's secret files, by its name and place alone. */
export function isSecretPath(abs: string, places: SecretPlaces): boolean {
  const name = abs.slice(abs.lastIndexOf("/") + 1)
  if (isSecretFileName(name)) return true
  const rel = relativeInside(places.home, abs)
  const sshKey = rel?.startsWith(".ssh/") && isSshKeyName(name)
  if (rel !== undefined && (SECRET_HOME_FILES.includes(rel) || sshKey)) return true
  return OPENCODE_SECRET_FILES.some((file) => abs === resolvePath(places.dataDir, file))
}

// Taking secrets out of a text -------------------------------------------------------------------------------------

/** What the model reads in a secret's place. */
export function redactionNote(source: string): string {
  return `[secret from ${source} redacted by semantic-anchors]`
}

// A base64 block wrapped at 76 (`base64 FILE`): found by a 76-character run before a line break (a cheap test that
// real outputs rarely pass), then its lines joined and searched for a secret's base64 form.
const WRAPPED_HINT = /[A-Za-z0-9+/]{76}\n/
const WRAPPED_BASE64 = /(?:[A-Za-z0-9+/]{76}\n)+[A-Za-z0-9+/]*={0,2}/g
const NOTE = /\[secret from [^\]\n]+ redacted by semantic-anchors\]/
const AROUND_NOTE = /[A-Za-z0-9+/]*\[secret from [^\]\n]+ redacted by semantic-anchors\][A-Za-z0-9+/]*=*/g

// A hex or character dump (`xxd`, `xxd -p`, `hexdump -C`, `od -A x -t x1z`, `od -c`) shows a secret split over its
// lines: found by a line that starts at offset 0 (`0000...`) or a 60-digit `xxd -p` line, decoded, and searched
// whole. The hint is two string searches and one cheap regex: a regex of the dump lines' shapes after a line break
// took 17 us per KB.
const XXD_PLAIN_HINT = /[0-9a-f]{60}\n/
function mayHoldDump(text: string): boolean {
  return text.startsWith("0000") || text.includes("\n0000") || XXD_PLAIN_HINT.test(text)
}
const DUMP_LINE = /^[0-9a-f]{6,8}:? (.*)$/ // xxd, hexdump -C, od -A x -t x1z: an offset, then the bytes
const HEX_GROUPS = /^[0-9a-f]{2,4}(?: [0-9a-f]{2,4})*$/ // the bytes: `4f50 454e` (xxd) or `4f 50 45 4e`
const PLAIN_HEX_LINE = /^[0-9a-f]{60}$/ // xxd -p (30 bytes a line)
const OD_CHAR_LINE = /^[0-7]{7}((?: {1,7}(?:\\[0-7]{1,3}|\\.|\S))+)$/ // od -c (a blank is 4 blanks more)
const SHORT_HEX_LINE = /^(?:[0-9a-f]{2})+$/ // the last line of `xxd -p`

/** The bytes a dump line shows, as text (Latin-1: a secret is ASCII), or undefined when it is no dump line. */
function dumpLineText(line: string): string | undefined {
  const hex = dumpLineHex(line)
  if (hex !== undefined) {
    let text = ""
    for (let i = 0; i + 1 < hex.length; i += 2) text += String.fromCharCode(parseInt(hex.slice(i, i + 2), 16))
    return text
  }
  const chars = OD_CHAR_LINE.exec(line)?.[1]
  if (chars === undefined) return undefined
  const escapes: Record<string, string> = { n: "\n", t: "\t", r: "\r", "0": "\0", "\\": "\\" }
  return chars
    .trim()
    .split(/ +/)
    .map((token) => (token.length === 2 && token[0] === "\\" ? (escapes[token[1]] ?? token[1]) : token))
    .join("")
}

/** A hex dump line's bytes as hex digits: the columns before its text column (split at two or more blanks). */
function dumpLineHex(line: string): string | undefined {
  if (PLAIN_HEX_LINE.test(line)) return line
  const rest = DUMP_LINE.exec(line)?.[1]
  if (rest === undefined) return undefined
  const parts = rest.trim().split(/ {2,}/)
  const columns = parts.length > 1 ? parts.slice(0, -1) : parts
  return columns.every((column) => HEX_GROUPS.test(column)) ? columns.join("").replace(/ /g, "") : undefined
}

/**
 * The secrets of a session's files and environment, searched for in a tool result in one search: each value as
 * written, its base64 forms (`base64 -w0 .env`) and each line of a private key; a base64 block wrapped at 76 is
 * joined first (`base64 .env`). Built once per learning (a regular expression of the values, longest first), used on
 * every result.
 */
export class SecretMatcher {
  private readonly values: Alternation | null // the values, their base64 forms, the private keys' lines
  private readonly encoded: Alternation | null // the base64 forms alone, for a wrapped block
  private readonly sources = new Map<string, string>() // each searched form -> its source
  private readonly encodedForms = new Set<string>()
  readonly size: number

  constructor(secrets: readonly Secret[], notSecrets: ReadonlySet<string> = new Set()) {
    const encoded = new Map<string, string>()
    for (const { value, source, only } of secrets) {
      if (notSecrets.has(value) || this.sources.has(value)) continue
      if (only !== "encoded") this.sources.set(value, source)
      if (only !== "written") for (const form of base64Forms(value)) if (!encoded.has(form)) encoded.set(form, source)
    }
    for (const [form, source] of encoded)
      if (!this.sources.has(form)) {
        this.sources.set(form, source)
        this.encodedForms.add(form)
      }
    this.size = this.sources.size
    this.values = alternation([...this.sources.keys()])
    this.encoded = alternation([...encoded.keys()])
  }

  /**
   * The text with each secret replaced by its note, the sources found and how many notes stand in the text;
   * undefined when it holds none.
   */
  redact(text: string): { text: string; sources: string[]; notes: number } | undefined {
    if (this.size === 0 || text.length < SECRET_MIN) return undefined
    const sources = new Set<string>()
    let notes = 0
    let encodedFound = false
    const note = (found: string) => {
      if (this.encodedForms.has(found)) encodedFound = true
      const source = this.sources.get(found) ?? "a secret file"
      sources.add(source)
      notes++
      return redactionNote(source)
    }
    let out = text
    if (this.values?.one.test(out)) {
      out = out.replace(this.values.all, note)
      // an encoded secret: the rest of its base64 run (the file around it) goes too (a run holds one note)
      if (encodedFound) out = out.replace(AROUND_NOTE, (run) => run.match(NOTE)![0])
    }
    if (this.values && mayHoldDump(out)) out = this.redactDumps(out, this.values.one, note)
    const encoded = this.encoded
    if (encoded && WRAPPED_HINT.test(out))
      out = out.replace(WRAPPED_BASE64, (block) => {
        const found = encoded.one.exec(block.replace(/\n/g, ""))
        return found ? note(found[0]) : block
      })
    return sources.size ? { text: out, sources: [...sources], notes } : undefined
  }

  /** Each run of dump lines whose decoded bytes hold a secret, replaced whole by its note. */
  private redactDumps(text: string, values: RegExp, note: (found: string) => string): string {
    const lines = text.split("\n")
    const out: string[] = []
    let i = 0
    while (i < lines.length) {
      const { decoded, end } = dumpRun(lines, i)
      const found = end > i ? values.exec(decoded) : null
      if (found) out.push(note(found[0]))
      else out.push(...lines.slice(i, Math.max(end, i + 1)))
      i = Math.max(end, i + 1)
    }
    return out.join("\n")
  }
}

/** The run of dump lines from `start` (none when it is no dump line): the bytes they show, and where it ends. */
function dumpRun(lines: string[], start: number): { decoded: string; end: number } {
  let decoded = ""
  let end = start
  while (end < lines.length) {
    let piece = dumpLineText(lines[end])
    // `xxd -p`'s last line is short: padded with zeros (NULs) to be read
    if (piece === undefined && end > start && SHORT_HEX_LINE.test(lines[end]) && PLAIN_HEX_LINE.test(lines[end - 1]))
      piece = dumpLineText(lines[end].padEnd(60, "0"))
    if (piece === undefined) break
    decoded += piece
    end++
  }
  return { decoded, end }
}

/** A search for any of a list of literal strings: `one` finds the first, `all` replaces every one. */
type Alternation = { one: RegExp; all: RegExp }

/** One regular expression for literal strings, longest first (so a longer secret wins over its own prefix). */
function alternation(values: string[]): Alternation | null {
  if (values.length === 0) return null
  const source = values
    .sort((a, b) => b.length - a.length)
    .map(escapeRegex)
    .join("|")
  return { one: new RegExp(source), all: new RegExp(source, "g") }
}

/**
 * A value's base64 forms at each of the three offsets it can start at in an encoded stream, without the characters
 * that also depend on the bytes around it.
 */
export function base64Forms(value: string): string[] {
  const bytes = new TextEncoder().encode(value)
  const forms: string[] = []
  for (let k = 0; k < 3; k++) {
    const padded = new Uint8Array(k + bytes.length)
    padded.set(bytes, k)
    const all = btoa(String.fromCharCode(...padded))
    const form = all.slice(Math.ceil((8 * k) / 6), Math.floor((8 * (k + bytes.length)) / 6))
    if (form.length >= ENCODED_MIN) forms.push(form)
  }
  return forms
}

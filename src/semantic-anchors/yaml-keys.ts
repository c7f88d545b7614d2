/**
 * Duplicate keys in a YAML text (Bun's parser keeps the last one silently).
 */

/** The change in flow-collection depth (`{ [` minus `} ]`) over a line, outside quotes and comments. */
function flowDepthChange(text: string): number {
  let depth = 0
  let quote = 0 // the char code of the open quote, or 0
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i)
    if (quote) {
      if (ch === 92 /* \ */ && quote === 34) i++
      else if (ch === quote) quote = 0
    } else if (ch === 34 /* " */ || ch === 39 /* ' */) quote = ch
    else if (ch === 35 /* # */ && (i === 0 || text.charCodeAt(i - 1) === 32 || text.charCodeAt(i - 1) === 9)) break
    else if (ch === 123 /* { */ || ch === 91 /* [ */) depth++
    else if (ch === 125 /* } */ || ch === 93 /* ] */) depth--
  }
  return depth
}

/** How deep a line leaves an open flow collection (0 when it opens none, the common case). */
function flowOpened(text: string): number {
  return text.includes("{") || text.includes("[") ? Math.max(0, flowDepthChange(text)) : 0
}

type DuplicateKey = { keyPath: string; key: string; line: number; firstLine: number }

/** Characters of a line in which a key is looked for: a key longer than this is no key a contract file has. */
const KEY_LINE_CHARS = 1024
const KEY_LINE = /^("(?:[^"\\]|\\.)*"|'(?:[^']|'')*'|[^\s#'"{[\]}&*!|>%@`,?:-][^#]*?)\s*:(?=\s|$)/
const BLOCK_SCALAR = /^\s*[|>][-+0-9]*\s*(#.*)?$/

/**
 * Keys written twice in one mapping. Bun.YAML keeps the last value silently, so `mode: block` followed by
 * `mode: info` would pass unseen. This is a line scan of the raw text, not a second YAML parser: it follows block
 * style only (indentation, `- ` items, `key: value` lines), and skips block scalars (`|`, `>`), comments and flow
 * collections (`{...}`, `[...]`), whose keys it does not check. Lines are numbered from 1.
 */
export function duplicateKeys(text: string): DuplicateKey[] {
  const found: DuplicateKey[] = []
  let stack: KeyScope[] = []
  let blockScalarIndent = -1 // inside a | or > scalar: lines indented deeper than this belong to it
  let flowDepth = 0 // inside a flow collection that spans lines
  let n = 0
  for (let start = 0; start <= text.length; n++) {
    let end = text.indexOf("\n", start)
    if (end < 0) end = text.length
    const lineEnd = end > start && text.charCodeAt(end - 1) === 13 ? end - 1 : end
    const lineStart = start
    start = end + 1
    let at = lineStart
    while (at < lineEnd && text.charCodeAt(at) === 32) at++
    const indent = at - lineStart
    const first = text.charCodeAt(at)
    const blank = at === lineEnd || ((first < 33 || first > 126) && /^\s*$/.test(text.slice(at, lineEnd)))
    if (blockScalarIndent >= 0) {
      if (blank || indent > blockScalarIndent) continue
      blockScalarIndent = -1
    }
    if (flowDepth > 0) {
      flowDepth = Math.max(0, flowDepth + flowDepthChange(text.slice(lineStart, lineEnd)))
      continue
    }
    if (blank || first === 35 /* # */) continue
    const line = text.slice(lineStart, lineEnd)
    if (indent === 0 && /^(---|\.\.\.)(\s|$)/.test(line)) {
      stack = []
      continue
    }
    // `- - key: value`: count the sequence dashes; the content starts at `column`.
    let column = indent
    let dashes = 0
    while (line[column] === "-" && (line[column + 1] === " " || column + 1 === line.length)) {
      dashes++
      column++
      while (line[column] === " ") column++
    }
    const rest = column ? line.slice(column) : line
    let current: KeyScope | undefined
    while (stack.length && stack[stack.length - 1].indent > indent) stack.pop()
    const top = stack[stack.length - 1]
    if (dashes) {
      // A new item of the sequence under the enclosing mapping's last key.
      const seqKey = top?.lastKey ?? ""
      let index = 0
      if (top) {
        top.items ??= new Map()
        index = (top.items.get(seqKey) ?? -1) + 1
        top.items.set(seqKey, index)
      }
      current = new KeyScope(column, top, `[${index}]${"[0]".repeat(dashes - 1)}`)
      stack.push(current)
    }
    const key = rest.includes(":")
      ? KEY_LINE.exec(rest.length > KEY_LINE_CHARS ? rest.slice(0, KEY_LINE_CHARS) : rest)
      : null
    if (!key) {
      flowDepth = flowOpened(rest)
      continue
    }
    if (!current) {
      if (top && top.indent === column) current = top
      else stack.push((current = new KeyScope(column, top, "")))
    }
    const name = key[1][0] === '"' || key[1][0] === "'" ? key[1].slice(1, -1) : key[1]
    const firstLine = current.keys.get(name)
    if (firstLine !== undefined && name !== "<<") {
      const keyPath = current.keyPath()
      found.push({ keyPath: keyPath ? `${keyPath}.${name}` : name, key: name, line: n + 1, firstLine })
    } else current.keys.set(name, n + 1)
    current.lastKey = name
    const value = rest.slice(key[0].length)
    if (BLOCK_SCALAR.test(value)) blockScalarIndent = column
    else flowDepth = flowOpened(value)
  }
  return found
}

/**
 * One mapping (or sequence item) of duplicateKeys' scan: the keys seen in it, by line. Its key path is made only when
 * a duplicate needs it: from the scope it is in, that scope's key when it opened, and its own `[index]` suffix.
 */
class KeyScope {
  readonly keys = new Map<string, number>()
  items?: Map<string, number> // the items seen of each sequence under a key of this mapping
  lastKey?: string
  private readonly parentKey?: string
  constructor(
    readonly indent: number,
    private readonly parent: KeyScope | undefined,
    private readonly suffix: string,
  ) {
    this.parentKey = parent?.lastKey
  }
  keyPath(): string {
    if (!this.parent) return this.suffix
    const base = this.parent.keyPath()
    const inner = !this.parentKey ? base : base ? `${base}.${this.parentKey}` : this.parentKey
    return inner + this.suffix
  }
}

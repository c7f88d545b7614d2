// Every relative link in README.md and docs/*.md points at a file that exists and, when it names a heading
// (`file.md#slug` or `#slug`), at a heading of that file, by GitHub's anchor rules: the heading's text without
// Markdown marks, lower-cased, every character that is not a letter, a digit, a blank, `-` or `_` dropped, each blank
// a `-`; a heading met again gets `-1`, `-2`, ... Links in code (fenced blocks, inline `code`) are not links.
import { describe, expect, test } from "bun:test"
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs"
import { dirname, join, relative, resolve } from "node:path"

const repo = resolve(import.meta.dir, "..")
const DOCS = [
  "README.md",
  ...readdirSync(join(repo, "docs"))
    .filter((f) => f.endsWith(".md"))
    .map((f) => `docs/${f}`),
  "CHANGELOG.md",
].filter((f) => existsSync(join(repo, f)))

/** The lines of a Markdown text outside fenced code blocks (a fence closes with the character that opened it). */
function linesOutsideFences(text: string): string[] {
  const lines: string[] = []
  let fence: string | null = null
  for (const line of text.split("\n")) {
    const open = /^\s*(`{3,}|~{3,})/.exec(line)
    if (fence === null && open) fence = open[1]![0]!
    else if (fence !== null && open && open[1]![0] === fence) fence = null
    else if (fence === null) lines.push(line)
  }
  return lines
}

/** The lines of a Markdown text outside fenced code blocks, with inline code spans blanked. */
function proseLines(text: string): string[] {
  return linesOutsideFences(text).map((line) => line.replace(/`+[^`]*`+/g, "``"))
}

/** GitHub's anchor slug of a heading's text. */
function slug(heading: string): string {
  return heading
    .replace(/`/g, "")
    .replace(/\[([^\]]*)\]\([^)]*\)/g, "$1") // a link in a heading: its text
    .replace(/[*_]{1,2}([^*_]+)[*_]{1,2}/g, "$1") // emphasis marks
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, "")
    .replace(/\s/g, "-")
}

/** Every anchor a Markdown file offers: its headings' slugs, numbered when repeated, and explicit <a id/name>. */
function anchors(text: string): Set<string> {
  const found = new Set<string>()
  const count = new Map<string, number>()
  const all: string[] = []
  for (const line of linesOutsideFences(text)) {
    const heading = /^#{1,6}\s+(.+?)\s*#*\s*$/.exec(line)
    if (heading) all.push(slug(heading[1]!))
    for (const m of line.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) found.add(m[1]!)
  }
  for (const base of all) {
    const n = count.get(base) ?? 0
    found.add(n === 0 ? base : `${base}-${n}`)
    count.set(base, n + 1)
  }
  return found
}

/** The relative link targets of a Markdown file: [text](target) and [text]: target, outside code. */
function links(text: string): string[] {
  const targets: string[] = []
  for (const line of proseLines(text)) {
    for (const m of line.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) targets.push(m[1]!)
    const reference = /^\s*\[[^\]]+\]:\s*(\S+)/.exec(line)
    if (reference) targets.push(reference[1]!)
  }
  return targets.filter((t) => !/^[a-z][a-z0-9+.-]*:/i.test(t)) // http:, https:, mailto: are not checked here
}

/** What is wrong with one link of `from` (a path relative to the repository), or null. */
function brokenLink(from: string, target: string): string | null {
  const [file, anchor] = target.split("#", 2) as [string, string | undefined]
  const path = file === "" ? join(repo, from) : resolve(dirname(join(repo, from)), decodeURIComponent(file))
  const shown = relative(repo, path)
  if (!path.startsWith(repo)) return `${target}: points outside the repository`
  if (!existsSync(path)) return `${target}: ${shown} does not exist`
  if (anchor === undefined || anchor === "") return null
  if (statSync(path).isDirectory() || !path.endsWith(".md"))
    return `${target}: an anchor into a file that is not Markdown`
  if (!anchors(readFileSync(path, "utf8")).has(decodeURIComponent(anchor)))
    return `${target}: ${shown} has no heading whose anchor is #${anchor}`
  return null
}

describe("the slug and link reader follow GitHub's rules", () => {
  test.each([
    ["Installing: install.sh", "installing-installsh"],
    ["Checking that it works: `./install.sh --check`", "checking-that-it-works-installsh---check"],
    ["What this proves, and what it does not", "what-this-proves-and-what-it-does-not"],
    [
      "On real work: guard-integrity and step-confirmation over real trajectories",
      "on-real-work-guard-integrity-and-step-confirmation-over-real-trajectories",
    ],
    ["The `/anchor` command (the human's controls)", "the-anchor-command-the-humans-controls"],
    ["Prüfen & Ziel", "prüfen--ziel"],
  ])("%s -> #%s", (heading, expected) => {
    expect(slug(heading)).toBe(expected)
  })

  test("a repeated heading is numbered; links in code are not links; external links are not checked", () => {
    expect([...anchors("# A\n## Tests\n```\n# not a heading\n```\n## Tests\n")]).toEqual(["a", "tests", "tests-1"])
    expect(links("[a](x.md) `[b](y.md)`\n```\n[c](z.md)\n```\n[d](https://e.org) [f](#g)\n[h]: docs/i.md\n")).toEqual([
      "x.md",
      "#g",
      "docs/i.md",
    ])
  })

  test("a broken file or anchor is found", () => {
    expect(brokenLink("README.md", "docs/no-such-page.md")).toContain("does not exist")
    expect(brokenLink("README.md", "#no-such-heading")).toContain("has no heading")
  })
})

describe("every relative link in README.md and docs/ resolves", () => {
  test("there are documents and links to check", () => {
    expect(DOCS).toContain("README.md")
    expect(DOCS.filter((d) => d.startsWith("docs/")).length).toBeGreaterThan(0)
    expect(DOCS.flatMap((d) => links(readFileSync(join(repo, d), "utf8"))).length).toBeGreaterThan(20)
  })

  test.each(DOCS)("%s", (doc) => {
    const broken = links(readFileSync(join(repo, doc), "utf8"))
      .map((target) => brokenLink(doc, target))
      .filter((problem) => problem !== null)
    expect(broken).toEqual([])
  })
})

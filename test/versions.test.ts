// opencode-versions.json is the one source of the opencode versions: the pinned dev toolchain (CI runs the end-to-end
// suite on it), the tested range install.sh gates on, and the last version-matrix run. This checks that the copies
// that cannot read it (package.json, the README, docs/) agree with it, and that the code that can read it holds no copy.
import { describe, expect, test } from "bun:test"
import fs from "node:fs"
import path from "node:path"

const repo = path.resolve(import.meta.dir, "..")
const read = (rel: string) => fs.readFileSync(path.join(repo, rel), "utf8")
const versions: {
  pinned: string
  newest?: string
  oldest: string
  matrix: { date: string; passed: string[]; failed: string[]; notInstallable: string[] }
} = JSON.parse(read("opencode-versions.json"))
const { pinned, oldest, matrix } = versions
// The top of the tested range: "newest" when the matrix passed on a release past the pinned dev toolchain (one npm
// serves only as its platform binary), else the pinned one.
const newest = versions.newest ?? pinned
const range = oldest === newest ? newest : `${oldest} to ${newest}`

const num = (v: string) => v.split(".").map(Number) as [number, number, number]
const compare = (a: string, b: string) => {
  const [x, y] = [num(a), num(b)]
  return x[0] - y[0] || x[1] - y[1] || x[2] - y[2]
}

describe("opencode-versions.json", () => {
  test("pinned, newest and oldest are X.Y.Z, oldest <= pinned <= newest, same major version", () => {
    for (const v of [pinned, newest, oldest]) expect(v).toMatch(/^\d+\.\d+\.\d+$/)
    expect(compare(oldest, pinned)).toBeLessThanOrEqual(0)
    expect(compare(pinned, newest)).toBeLessThanOrEqual(0)
    expect(num(oldest)[0]).toBe(num(newest)[0])
  })

  test("the tested range is what the matrix passed on: both ends passed, nothing in between failed", () => {
    expect(matrix.passed).toContain(pinned)
    expect(matrix.passed).toContain(newest)
    expect(matrix.passed).toContain(oldest)
    for (const v of matrix.passed) {
      expect(compare(v, oldest)).toBeGreaterThanOrEqual(0)
      expect(compare(v, newest)).toBeLessThanOrEqual(0)
    }
    for (const v of matrix.failed) expect(compare(v, oldest) < 0 || compare(v, newest) > 0).toBe(true)
    for (const v of matrix.notInstallable) expect(matrix.passed).not.toContain(v)
    if (matrix.passed.length > 1) expect(matrix.date).toMatch(/^\d{4}-\d{2}-\d{2}$/)
  })
})

describe("the copies that cannot read it agree with it", () => {
  test("package.json pins opencode-ai and @opencode-ai/plugin at the pinned version", () => {
    const pkg = JSON.parse(read("package.json"))
    expect(pkg.devDependencies["opencode-ai"]).toBe(pinned)
    expect(pkg.devDependencies["@opencode-ai/plugin"]).toBe(pinned)
  })

  test("the installed dev toolchain is that version", () => {
    expect(JSON.parse(read("node_modules/opencode-ai/package.json")).version).toBe(pinned)
  })

  test("README: the Supported row lists the versions the matrix passed on, with its date", () => {
    const readme = read("README.md")
    const row = readme.split("\n").find((l) => l.startsWith("| Supported |"))
    expect(row).toBeDefined()
    expect(row).toContain(`opencode **${range}**`)
    const list = [...matrix.passed].sort(compare).join(", ")
    if (matrix.passed.length > 1) expect(row).toContain(`passed on ${list} (${matrix.date}`)
    // A release inside the range that could not be tested is named there, not silently covered.
    const untestedInRange = matrix.notInstallable.filter((v) => compare(v, oldest) > 0 && compare(v, newest) < 0)
    for (const v of untestedInRange) expect(row).toContain(v)
  })

  const documents = ["README.md", ...fs.readdirSync(path.join(repo, "docs")).map((f) => `docs/${f}`)].filter((f) =>
    f.endsWith(".md"),
  )
  test.each(documents)(
    "%s: every opencode version it names is the pinned one, an end of the range, or a matrix result",
    (document) => {
      const text = read(document)
      const named = [...text.matchAll(/opencode(?:-ai)?(?:@| \*\*| )(\d+\.\d+\.\d+)/g)].map((m) => m[1])
      const known = new Set([pinned, newest, oldest, ...matrix.passed, ...matrix.failed, ...matrix.notInstallable])
      expect(named.filter((v) => !known.has(v!))).toEqual([])
    },
  )

  test("README names the pinned version", () => {
    expect(read("README.md")).toContain(`opencode ${pinned}`)
  })
})

// package.json's "version" is the one source of the plugins' own version: install.sh reads it, and the texts that
// show it must follow it.
describe("the plugins' version: package.json's", () => {
  const version: string = JSON.parse(read("package.json")).version

  test("is X.Y.Z, and CHANGELOG.md has its heading (or it is still Unreleased there)", () => {
    expect(version).toMatch(/^\d+\.\d+\.\d+$/)
    expect(read("CHANGELOG.md")).toMatch(new RegExp(`^## \\[${version.replace(/\./g, "\\.")}\\]`, "m"))
  })

  test.each(["README.md", "CHANGELOG.md", ...fs.readdirSync(path.join(repo, "docs")).map((f) => `docs/${f}`)])(
    "%s: every opencode-guards version it shows is package.json's",
    (document) => {
      const shown = [...read(document).matchAll(/opencode-guards (\d+\.\d+\.\d+)/g)].map((m) => m[1])
      expect(shown.filter((v) => v !== version)).toEqual([])
    },
  )

  test("install.sh holds no copy of it", () => {
    expect(read("install.sh")).not.toContain(version)
  })
})

describe("the code that reads it holds no copy", () => {
  test.each([
    "install.sh",
    "doctor/check.mjs",
    "doctor/sandbox.mjs",
    "test/e2e/harness.ts",
    "test/hosts.sh",
    "test/run.sh",
  ])("%s names no opencode version", (file) => {
    expect(read(file)).not.toMatch(/\b1\.\d+\.\d+\b/)
  })
})

describe("package-lock.json is whole", () => {
  // `npm ci` refuses a lock that lacks any optional dependency of a locked package ("Missing: opencode-darwin-arm64@
  // from lock file"), even one it would skip on this platform: every platform binary of opencode-ai is listed.
  test("every optional dependency of opencode-ai has an entry, with the platform it is for", () => {
    const lock = JSON.parse(read("package-lock.json"))
    const host = lock.packages["node_modules/opencode-ai"]
    expect(host.version).toBe(pinned)
    for (const [name, version] of Object.entries(host.optionalDependencies as Record<string, string>)) {
      const entry = lock.packages[`node_modules/${name}`]
      expect({ name, version: entry?.version, optional: entry?.optional }).toEqual({ name, version, optional: true })
      expect(entry.os.length).toBe(1)
      expect(entry.cpu.length).toBe(1)
    }
  })
})

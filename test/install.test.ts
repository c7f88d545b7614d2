// Tests of install.sh: every option runs the real script with `bash install.sh ...` against a throw-away world
// (temporary HOME, XDG config dir, a source checkout) made with fs.mkdtempSync; never the real ~/.config.
// The --check tests run the real opencode of the dev toolchain (node_modules/.bin/opencode) in its sandbox.
import { afterEach, describe, expect, test } from "bun:test"
import { spawnSync } from "node:child_process"
import crypto from "node:crypto"
import fs from "node:fs"
import os from "node:os"
import path from "node:path"
import { fileURLToPath } from "node:url"

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
const realOpencode = path.join(repo, "node_modules", ".bin", "opencode")
const PLUGIN_FILES = ["loop-guard.ts", "semantic-anchors.ts", "opencode-semantic-anchors.schema.json"]
const MANIFEST = "opencode-guards.sha256"

const sha256 = (data: string | Buffer) => crypto.createHash("sha256").update(data).digest("hex")

/** PATH without any directory that holds an `opencode` (npm test puts node_modules/.bin first). */
function pathWithoutOpencode(): string {
  return (process.env.PATH ?? "/usr/bin:/bin")
    .split(":")
    .filter((dir) => dir && !fs.existsSync(path.join(dir, "opencode")))
    .join(":")
}

interface World {
  root: string
  home: string
  xdg: string
  /** XDG_CONFIG_HOME/opencode/plugins: where a default install lands. */
  plugins: string
  /** A checkout to install from: a copy of the real install.sh plus whatever plugin files a test puts there. */
  src: string
  tmp: string
  bin: string
  /** Environment for the installer: nothing of the developer's (no OPENCODE_CONFIG_DIR leaking in). */
  env: Record<string, string>
  cleanup(): void
}

function makeWorld(sources: Record<string, string> | "repo" = placeholderSources()): World {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "install-test-"))
  const home = path.join(root, "home")
  const xdg = path.join(root, "xdg")
  const src = path.join(root, "src")
  const tmp = path.join(root, "tmp")
  const bin = path.join(root, "bin")
  for (const d of [home, xdg, src, tmp, bin]) fs.mkdirSync(d, { recursive: true })
  fs.copyFileSync(path.join(repo, "install.sh"), path.join(src, "install.sh"))
  fs.mkdirSync(path.join(src, "test", "e2e"), { recursive: true })
  fs.copyFileSync(path.join(repo, "test", "e2e", "fake-llm.mjs"), path.join(src, "test", "e2e", "fake-llm.mjs"))
  if (sources === "repo") {
    for (const f of PLUGIN_FILES)
      if (fs.existsSync(path.join(repo, f))) fs.copyFileSync(path.join(repo, f), path.join(src, f))
  } else {
    for (const [f, text] of Object.entries(sources)) fs.writeFileSync(path.join(src, f), text)
  }
  return {
    root,
    home,
    xdg,
    plugins: path.join(xdg, "opencode", "plugins"),
    src,
    tmp,
    bin,
    env: { PATH: `${bin}:${pathWithoutOpencode()}`, HOME: home, XDG_CONFIG_HOME: xdg, TMPDIR: tmp, LANG: "C.UTF-8" },
    cleanup: () => fs.rmSync(root, { recursive: true, force: true }),
  }
}

/** Stand-ins for the plugin files: installing is about files, not about what is in them. */
function placeholderSources(version = 1): Record<string, string> {
  return {
    "loop-guard.ts": `// loop-guard placeholder v${version}\n`,
    "semantic-anchors.ts": `// semantic-anchors placeholder v${version}\n`,
    "opencode-semantic-anchors.schema.json": `{"$comment": "schema placeholder v${version}"}\n`,
  }
}

interface Result {
  code: number
  stdout: string
  stderr: string
  out: string
}

function runInstaller(
  world: World,
  args: string[],
  opts: { env?: Record<string, string | undefined>; cwd?: string; script?: string; timeoutMs?: number } = {},
): Result {
  const env: Record<string, string> = { ...world.env }
  for (const [k, v] of Object.entries(opts.env ?? {})) {
    if (v === undefined) delete env[k]
    else env[k] = v
  }
  const r = spawnSync("bash", [opts.script ?? path.join(world.src, "install.sh"), ...args], {
    env,
    cwd: opts.cwd ?? world.root,
    encoding: "utf8",
    timeout: opts.timeoutMs ?? 60_000,
  })
  const stdout = r.stdout ?? ""
  const stderr = r.stderr ?? ""
  return { code: r.status ?? -1, stdout, stderr, out: stdout + stderr }
}

/** A fake `opencode` that prints the given text for --version (and exits with the given code). */
function stubOpencode(dir: string, versionOutput: string, exitCode = 0): string {
  const file = path.join(dir, "opencode")
  fs.writeFileSync(file, `#!/bin/sh\nprintf '%s\\n' '${versionOutput}'\nexit ${exitCode}\n`)
  fs.chmodSync(file, 0o755)
  return file
}

/** Every entry under dir: relative path -> "dir", "link:<target>" or "file:<sha256>:<mode>:<mtime>". */
function snapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {}
  const walk = (d: string) => {
    if (!fs.existsSync(d)) return
    for (const name of fs.readdirSync(d).sort()) {
      const p = path.join(d, name)
      const rel = path.relative(dir, p)
      const st = fs.lstatSync(p)
      if (st.isSymbolicLink()) out[rel] = `link:${fs.readlinkSync(p)}`
      else if (st.isDirectory()) {
        out[rel] = "dir"
        walk(p)
      } else out[rel] = `file:${sha256(fs.readFileSync(p))}:${st.mode}:${st.mtimeMs}`
    }
  }
  walk(dir)
  return out
}

/** The manifest as { name: hash }, or null when there is none. */
function readManifest(pluginsDir: string): Record<string, string> | null {
  const file = path.join(pluginsDir, MANIFEST)
  if (!fs.existsSync(file)) return null
  const entries: Record<string, string> = {}
  for (const line of fs.readFileSync(file, "utf8").split("\n")) {
    if (!line) continue
    const m = /^([0-9a-f]{64}) {2}(\S+)$/.exec(line)
    if (!m) throw new Error(`malformed manifest line: ${JSON.stringify(line)}`)
    entries[m[2]!] = m[1]!
  }
  return entries
}

const read = (file: string) => fs.readFileSync(file, "utf8")

// ---------------------------------------------------------------------------------------------------------------

const worlds: World[] = []
function world(sources?: Record<string, string> | "repo"): World {
  const w = makeWorld(sources)
  worlds.push(w)
  return w
}
afterEach(() => {
  for (const w of worlds.splice(0)) w.cleanup()
})

const BACKUP = /^(.+)\.backup-\d{8}-\d{6}(-\d+)?$/
const backupsIn = (dir: string) => fs.readdirSync(dir).filter((f) => BACKUP.test(f))

describe("fresh install", () => {
  test("copies the three files into XDG_CONFIG_HOME/opencode/plugins and records their sha256", () => {
    const w = world()
    const r = runInstaller(w, [])
    expect(r.code).toBe(0)
    for (const f of PLUGIN_FILES) expect(read(path.join(w.plugins, f))).toBe(read(path.join(w.src, f)))
    expect(readManifest(w.plugins)).toEqual(
      Object.fromEntries(PLUGIN_FILES.map((f) => [f, sha256(fs.readFileSync(path.join(w.src, f)))])),
    )
    expect(fs.readdirSync(w.plugins).sort()).toEqual([...PLUGIN_FILES, MANIFEST].sort())
    expect(r.stdout).toContain("Restart opencode")
    expect(r.stdout).toContain("opencode is not on PATH: installing anyway")
    expect(fs.readdirSync(w.home)).toEqual([]) // XDG_CONFIG_HOME wins over HOME
  })

  test("the manifest is in sha256sum --check format", () => {
    const w = world()
    runInstaller(w, [])
    const r = spawnSync("sha256sum", ["--check", MANIFEST], { cwd: w.plugins, encoding: "utf8" })
    expect(r.status).toBe(0)
    expect(r.stdout.trim().split("\n").sort()).toEqual(PLUGIN_FILES.map((f) => `${f}: OK`).sort())
  })

  test.each([
    [
      "HOME/.config/opencode when XDG_CONFIG_HOME is unset",
      { XDG_CONFIG_HOME: undefined },
      [],
      "home/.config/opencode",
    ],
    ["OPENCODE_CONFIG_DIR over XDG_CONFIG_HOME", { OPENCODE_CONFIG_DIR: "$root/ocd" }, [], "ocd"],
    ["--dir over OPENCODE_CONFIG_DIR", { OPENCODE_CONFIG_DIR: "$root/ocd" }, ["--dir", "$root/given"], "given"],
    ["--dir=DIR form", {}, ["--dir=$root/given"], "given"],
    ["a relative --dir, against the working directory", {}, ["--dir", "rel/cfg"], "rel/cfg"],
  ])("config dir: %s", (_name, env, args, expected) => {
    const w = world()
    const fill = (s: string) => s.replace("$root", w.root)
    const envFilled = Object.fromEntries(
      Object.entries(env).map(([k, v]) => [k, v === undefined ? undefined : fill(v)]),
    )
    const r = runInstaller(w, args.map(fill), { env: envFilled })
    expect(r.code).toBe(0)
    const pluginsDir = path.join(w.root, expected, "plugins")
    for (const f of PLUGIN_FILES) expect(fs.existsSync(path.join(pluginsDir, f))).toBe(true)
    expect(readManifest(pluginsDir)).not.toBeNull()
    if (expected !== "home/.config/opencode") expect(fs.existsSync(w.plugins)).toBe(false)
  })

  test("installs the files that exist and names the ones it skipped", () => {
    const w = world({ "loop-guard.ts": "// only loop-guard\n" })
    const r = runInstaller(w, [])
    expect(r.code).toBe(0)
    expect(fs.readdirSync(w.plugins).sort()).toEqual(["loop-guard.ts", MANIFEST].sort())
    expect(r.stdout).toContain("skipped semantic-anchors.ts: not in this checkout")
    expect(r.stdout).toContain("skipped opencode-semantic-anchors.schema.json: not in this checkout")
  })

  test("nothing to install: exit 1, says what to do, writes nothing", () => {
    const w = world({})
    const before = snapshot(w.root)
    const r = runInstaller(w, [])
    expect(r.code).toBe(1)
    expect(r.stderr).toContain("nothing to install")
    expect(r.stderr).toContain("complete checkout")
    expect(snapshot(w.root)).toEqual(before)
  })

  test("the repository's own install.sh installs every plugin file present in the checkout, byte for byte", () => {
    const w = world()
    const r = runInstaller(w, [], { script: path.join(repo, "install.sh") })
    expect(r.code).toBe(0)
    for (const f of PLUGIN_FILES) {
      if (fs.existsSync(path.join(repo, f))) expect(read(path.join(w.plugins, f))).toBe(read(path.join(repo, f)))
      else expect(r.stdout).toContain(`skipped ${f}`)
    }
  })
})

describe("re-install", () => {
  test("is idempotent: exit 0, up to date, not one byte or timestamp changes", () => {
    const w = world()
    runInstaller(w, [])
    const before = snapshot(w.root)
    const r = runInstaller(w, [])
    expect(r.code).toBe(0)
    expect(r.stdout).toContain("already up to date")
    expect(r.stdout.match(/up to date: /g)?.length).toBe(3)
    expect(snapshot(w.root)).toEqual(before)
  })

  test("updates owned files to a new version and records the new hashes, without backups", () => {
    const w = world()
    runInstaller(w, [])
    for (const [f, text] of Object.entries(placeholderSources(2))) fs.writeFileSync(path.join(w.src, f), text)
    const r = runInstaller(w, [])
    expect(r.code).toBe(0)
    expect(r.stdout).toContain(`update ${path.join(w.plugins, "loop-guard.ts")}`)
    for (const [f, text] of Object.entries(placeholderSources(2))) {
      expect(read(path.join(w.plugins, f))).toBe(text)
      expect(readManifest(w.plugins)![f]).toBe(sha256(text))
    }
    expect(backupsIn(w.plugins)).toEqual([])
  })

  test("adopts an identical copy it did not record (e.g. from the first install.sh) without a backup", () => {
    const w = world()
    fs.mkdirSync(w.plugins, { recursive: true })
    fs.copyFileSync(path.join(w.src, "loop-guard.ts"), path.join(w.plugins, "loop-guard.ts"))
    const r = runInstaller(w, [])
    expect(r.code).toBe(0)
    expect(r.stdout).toContain("identical content, now recorded")
    expect(Object.keys(readManifest(w.plugins)!).sort()).toEqual([...PLUGIN_FILES].sort())
    expect(backupsIn(w.plugins)).toEqual([])
  })
})

describe("files it does not own", () => {
  const cases: [string, (w: World) => void][] = [
    [
      "a foreign file",
      (w) => fs.writeFileSync(path.join(w.plugins, "loop-guard.ts"), "// the user's own loop-guard\n"),
    ],
    ["a directory", (w) => fs.mkdirSync(path.join(w.plugins, "loop-guard.ts"))],
    [
      "a symlink to the user's file",
      (w) => {
        fs.writeFileSync(path.join(w.root, "mine.ts"), "// the user's file\n")
        fs.symlinkSync(path.join(w.root, "mine.ts"), path.join(w.plugins, "loop-guard.ts"))
      },
    ],
    [
      "a dangling symlink",
      (w) => fs.symlinkSync(path.join(w.root, "nowhere.ts"), path.join(w.plugins, "loop-guard.ts")),
    ],
  ]

  test.each(cases)("%s in the way: refused with exit 3, nothing written at all", (_name, setUp) => {
    const w = world()
    fs.mkdirSync(w.plugins, { recursive: true })
    setUp(w)
    const before = snapshot(w.root)
    const r = runInstaller(w, [])
    expect(r.code).toBe(3)
    expect(r.stderr).toContain(`${path.join(w.plugins, "loop-guard.ts")} exists and was not installed by install.sh`)
    expect(r.stderr).toContain("nothing was written")
    expect(r.stderr).toContain("--force")
    expect(snapshot(w.root)).toEqual(before) // not even semantic-anchors.ts or a manifest
  })

  test.each(cases)(
    "%s with --force: moved to a timestamped backup that opencode does not load, then installed",
    (_name, setUp) => {
      const w = world()
      fs.mkdirSync(w.plugins, { recursive: true })
      setUp(w)
      const target = path.join(w.plugins, "loop-guard.ts")
      const old = snapshot(w.plugins)["loop-guard.ts"]
      const outside = snapshot(w.root)["mine.ts"]
      const r = runInstaller(w, ["--force"])
      expect(r.code).toBe(0)
      const backups = backupsIn(w.plugins)
      expect(backups.length).toBe(1)
      expect(backups[0]!.startsWith("loop-guard.ts.backup-")).toBe(true)
      expect(/\.(ts|js)$/.test(backups[0]!)).toBe(false)
      expect(r.stdout).toContain(`move the existing ${target} to ${path.join(w.plugins, backups[0]!)}`)
      // the backup is the old entry, moved as it was (content, or the link itself)
      expect(snapshot(w.plugins)[backups[0]!]?.split(":").slice(0, 2)).toEqual(old!.split(":").slice(0, 2))
      expect(fs.lstatSync(target).isFile()).toBe(true)
      expect(read(target)).toBe(read(path.join(w.src, "loop-guard.ts")))
      expect(readManifest(w.plugins)!["loop-guard.ts"]).toBe(sha256(read(target)))
      expect(snapshot(w.root)["mine.ts"]).toBe(outside) // a symlink's target is never written through
    },
  )

  test("an owned file the user edited is not overwritten on re-install; --force keeps the edit in a backup", () => {
    const w = world()
    runInstaller(w, [])
    const target = path.join(w.plugins, "loop-guard.ts")
    fs.appendFileSync(target, "// my tuning\n")
    const edited = read(target)
    for (const [f, text] of Object.entries(placeholderSources(2))) fs.writeFileSync(path.join(w.src, f), text)
    const before = snapshot(w.root)
    const refused = runInstaller(w, [])
    expect(refused.code).toBe(3)
    expect(refused.stderr).toContain(`${target} was installed by install.sh but you changed it since`)
    expect(snapshot(w.root)).toEqual(before)

    const forced = runInstaller(w, ["--force"])
    expect(forced.code).toBe(0)
    const [backup] = backupsIn(w.plugins)
    expect(read(path.join(w.plugins, backup!))).toBe(edited)
    expect(read(target)).toBe(placeholderSources(2)["loop-guard.ts"]!)
  })

  test("warns about a second copy in plugin/ (singular), which opencode would also load", () => {
    const w = world()
    fs.mkdirSync(path.join(w.xdg, "opencode", "plugin"), { recursive: true })
    fs.writeFileSync(path.join(w.xdg, "opencode", "plugin", "loop-guard.ts"), "// older manual copy\n")
    const r = runInstaller(w, [])
    expect(r.code).toBe(0)
    expect(r.stderr).toContain("plugin/loop-guard.ts also exists and opencode loads it too")
  })
})

describe("--uninstall", () => {
  test("removes exactly the owned files and the manifest; leaves the user's files", () => {
    const w = world()
    runInstaller(w, [])
    fs.writeFileSync(path.join(w.plugins, "my-plugin.ts"), "// the user's\n")
    const r = runInstaller(w, ["--uninstall"])
    expect(r.code).toBe(0)
    expect(fs.readdirSync(w.plugins)).toEqual(["my-plugin.ts"])
    expect(r.stdout).toContain("Restart opencode")
  })

  test("leaves a same-name file it does not own", () => {
    const w = world()
    fs.mkdirSync(w.plugins, { recursive: true })
    fs.writeFileSync(path.join(w.plugins, "loop-guard.ts"), "// not ours\n")
    const before = snapshot(w.root)
    const r = runInstaller(w, ["--uninstall"])
    expect(r.code).toBe(0)
    expect(r.stdout).toContain("left alone")
    expect(snapshot(w.root)).toEqual(before)
  })

  test("keeps an owned file the user edited (exit 3, warning, still recorded); --force moves it to a backup", () => {
    const w = world()
    runInstaller(w, [])
    const target = path.join(w.plugins, "semantic-anchors.ts")
    fs.writeFileSync(target, "// edited by the user\n")
    const kept = runInstaller(w, ["--uninstall"])
    expect(kept.code).toBe(3)
    expect(kept.stderr).toContain(`kept ${target}: you changed it since`)
    expect(kept.stderr).toContain("--uninstall --force")
    expect(fs.readdirSync(w.plugins).sort()).toEqual([MANIFEST, "semantic-anchors.ts"])
    expect(read(target)).toBe("// edited by the user\n")
    expect(Object.keys(readManifest(w.plugins)!)).toEqual(["semantic-anchors.ts"])

    const forced = runInstaller(w, ["--uninstall", "--force"])
    expect(forced.code).toBe(0)
    const entries = fs.readdirSync(w.plugins)
    expect(entries.length).toBe(1)
    expect(entries[0]).toMatch(BACKUP)
    expect(read(path.join(w.plugins, entries[0]!))).toBe("// edited by the user\n")
  })

  test("an owned file already deleted by the user is dropped from the manifest", () => {
    const w = world()
    runInstaller(w, [])
    fs.rmSync(path.join(w.plugins, "loop-guard.ts"))
    const r = runInstaller(w, ["--uninstall"])
    expect(r.code).toBe(0)
    expect(r.stdout).toContain("already gone")
    expect(fs.readdirSync(w.plugins)).toEqual([])
  })

  test("needs no supported opencode: a stub reporting 0.1.0 does not stop it", () => {
    const w = world()
    runInstaller(w, [])
    stubOpencode(w.bin, "0.1.0")
    const r = runInstaller(w, ["--uninstall"])
    expect(r.code).toBe(0)
    expect(fs.readdirSync(w.plugins)).toEqual([])
  })
})

describe("--dry-run", () => {
  const scenarios: [string, (w: World) => void, string[], RegExp[]][] = [
    [
      "fresh install",
      () => {},
      ["--dry-run"],
      [/would create .*\/plugins/, /would install .*loop-guard\.ts/, /would record ownership/],
    ],
    [
      "install with --force over a foreign file",
      (w) => {
        fs.mkdirSync(w.plugins, { recursive: true })
        fs.writeFileSync(path.join(w.plugins, "loop-guard.ts"), "// foreign\n")
      },
      ["--dry-run", "--force"],
      [
        /would move the existing .*loop-guard\.ts to .*loop-guard\.ts\.backup-\d{8}-\d{6}/,
        /would install .*loop-guard\.ts/,
      ],
    ],
    [
      "update",
      (w) => {
        runInstaller(w, [])
        fs.writeFileSync(path.join(w.src, "loop-guard.ts"), "// v2\n")
      },
      ["--dry-run"],
      [/would update .*loop-guard\.ts/, /up to date: .*semantic-anchors\.ts/],
    ],
    [
      "uninstall",
      (w) => void runInstaller(w, []),
      ["--dry-run", "--uninstall"],
      [/would remove .*loop-guard\.ts/, /would remove .*opencode-guards\.sha256/],
    ],
    [
      "--example-config",
      () => {},
      ["--dry-run", "--example-config"],
      [/would write an example .*opencode-semantic-anchors\.yaml/],
    ],
  ]
  test.each(scenarios)("%s: prints every action, writes nothing", (_name, setUp, args, expected) => {
    const w = world()
    setUp(w)
    const before = snapshot(w.root)
    const r = runInstaller(w, args)
    expect(r.code).toBe(0)
    for (const line of expected) expect(r.stdout).toMatch(line)
    expect(r.stdout).toContain("dry run: nothing was written")
    expect(snapshot(w.root)).toEqual(before)
  })

  test("a refusal is reported the same way in a dry run", () => {
    const w = world()
    fs.mkdirSync(w.plugins, { recursive: true })
    fs.writeFileSync(path.join(w.plugins, "semantic-anchors.ts"), "// foreign\n")
    const r = runInstaller(w, ["--dry-run"])
    expect(r.code).toBe(3)
    expect(r.stderr).toContain("was not installed by install.sh")
  })
})

describe("--only", () => {
  test.each([
    ["loop-guard", ["loop-guard.ts"]],
    ["semantic-anchors", ["opencode-semantic-anchors.schema.json", "semantic-anchors.ts"]],
  ])("--only %s installs that plugin's files only", (name, files) => {
    const w = world()
    const r = runInstaller(w, ["--only", name])
    expect(r.code).toBe(0)
    expect(fs.readdirSync(w.plugins).sort()).toEqual([...files, MANIFEST].sort())
    expect(Object.keys(readManifest(w.plugins)!).sort()).toEqual(files)
  })

  test("--uninstall --only loop-guard removes loop-guard and keeps semantic-anchors recorded", () => {
    const w = world()
    runInstaller(w, [])
    const r = runInstaller(w, ["--uninstall", "--only=loop-guard"])
    expect(r.code).toBe(0)
    expect(fs.existsSync(path.join(w.plugins, "loop-guard.ts"))).toBe(false)
    expect(Object.keys(readManifest(w.plugins)!).sort()).toEqual([
      "opencode-semantic-anchors.schema.json",
      "semantic-anchors.ts",
    ])
  })

  test("a foreign semantic-anchors.ts does not stop --only loop-guard", () => {
    const w = world()
    fs.mkdirSync(w.plugins, { recursive: true })
    fs.writeFileSync(path.join(w.plugins, "semantic-anchors.ts"), "// foreign\n")
    expect(runInstaller(w, ["--only", "loop-guard"]).code).toBe(0)
    expect(read(path.join(w.plugins, "semantic-anchors.ts"))).toBe("// foreign\n")
  })
})

describe("version gate", () => {
  test.each([
    ["1.18.33", "1.18.33", 0, [], 0, "opencode 1.18.33 ($stub): supported"],
    ["a prefixed supported version", "opencode 1.18.33", 0, [], 0, "supported"],
    [
      "an older version",
      "1.17.0",
      0,
      [],
      4,
      "reports version 1.17.0; these plugins are proven with opencode 1.18.33 only",
    ],
    ["a newer version", "2.0.0", 0, [], 4, "reports version 2.0.0"],
    ["a pre-release of the supported version", "1.18.33-beta.1", 0, [], 4, "reports version 1.18.33-beta.1"],
    ["a failing --version", "boom", 1, [], 4, "did not report a version"],
    ["an older version with --force", "1.17.0", 0, ["--force"], 0, "installing anyway (--force)"],
  ])("opencode on PATH reporting %s", (_name, output, stubExit, args, code, message) => {
    const w = world()
    const stub = stubOpencode(w.bin, output, stubExit)
    const before = snapshot(w.root)
    const r = runInstaller(w, args)
    expect(r.code).toBe(code)
    expect(r.out).toContain(message.replace("$stub", stub))
    if (code === 4) {
      expect(r.stderr).toContain("Nothing was written")
      expect(r.stderr).toContain("npm i -g opencode-ai@1.18.33")
      expect(r.stderr).toContain("--force")
      expect(snapshot(w.root)).toEqual(before)
    } else {
      expect(fs.existsSync(path.join(w.plugins, "loop-guard.ts"))).toBe(true)
    }
  })

  test("--opencode PATH is used instead of PATH", () => {
    const w = world()
    const other = path.join(w.root, "other")
    fs.mkdirSync(other)
    const stub = stubOpencode(other, "1.0.0")
    const r = runInstaller(w, ["--opencode", stub])
    expect(r.code).toBe(4)
    expect(r.stderr).toContain(`opencode at ${stub} reports version 1.0.0`)
  })

  test("--opencode that is not an executable is a usage error", () => {
    const w = world()
    const r = runInstaller(w, ["--opencode", path.join(w.root, "missing")])
    expect(r.code).toBe(2)
    expect(r.stderr).toContain("is not an executable file")
  })

  test("the supported range is the one variable at the top, and the one the end-to-end suite pins", () => {
    const script = read(path.join(repo, "install.sh"))
    const supported = /^SUPPORTED_OPENCODE="([^"]+)"$/m.exec(script)?.[1]
    const pinned = JSON.parse(read(path.join(repo, "package.json"))).devDependencies["opencode-ai"]
    expect(supported?.split(" ")).toContain(pinned)
  })
})

describe("--example-config", () => {
  test("writes a commented example next to the plugins dir when there is none", () => {
    const w = world()
    const r = runInstaller(w, ["--example-config"])
    expect(r.code).toBe(0)
    const file = path.join(w.xdg, "opencode", "opencode-semantic-anchors.yaml")
    const text = read(file)
    expect(text.split("\n")[0]).toBe("# yaml-language-server: $schema=./plugins/opencode-semantic-anchors.schema.json")
    // Everything but the version line is a comment or blank: the file changes no behaviour until edited.
    const active = text.split("\n").filter((l) => l.trim() && !l.trim().startsWith("#"))
    expect(active).toEqual(["version: 1"])
    expect(text).toContain("#   - id: no-force-push")
    expect(r.stdout).toContain(`wrote an example ${file}`)
  })

  test("never overwrites an existing file, and --uninstall leaves it", () => {
    const w = world()
    const file = path.join(w.xdg, "opencode", "opencode-semantic-anchors.yaml")
    fs.mkdirSync(path.dirname(file), { recursive: true })
    fs.writeFileSync(file, "version: 1\ncontracts: []\n")
    const r = runInstaller(w, ["--example-config"])
    expect(r.code).toBe(0)
    expect(r.stdout).toContain(`kept your ${file}`)
    expect(read(file)).toBe("version: 1\ncontracts: []\n")
    const u = runInstaller(w, ["--uninstall"])
    expect(u.code).toBe(0)
    expect(read(file)).toBe("version: 1\ncontracts: []\n")
  })

  test("no contract file is created without it", () => {
    const w = world()
    runInstaller(w, [])
    expect(fs.readdirSync(path.join(w.xdg, "opencode"))).toEqual(["plugins"])
  })

  test("outside the default config dir it says how to point semantic-anchors at the file", () => {
    const w = world()
    const r = runInstaller(w, ["--example-config", "--dir", path.join(w.root, "elsewhere")])
    expect(r.code).toBe(0)
    expect(r.stdout).toContain(
      `OPENCODE_SEMANTIC_ANCHORS_CONFIG=${path.join(w.root, "elsewhere", "opencode-semantic-anchors.yaml")}`,
    )
  })
})

describe("usage", () => {
  test("--help documents every option, the supported versions and every exit code", () => {
    const w = world()
    const r = runInstaller(w, ["--help"])
    expect(r.code).toBe(0)
    for (const opt of [
      "--only",
      "--dir",
      "--dry-run",
      "--force",
      "--uninstall",
      "--example-config",
      "--check",
      "--opencode",
    ])
      expect(r.stdout).toContain(opt)
    expect(r.stdout).toContain("Supported opencode versions (proven by the end-to-end suite): 1.18.33")
    for (const code of [0, 1, 2, 3, 4, 5]) expect(r.stdout).toMatch(new RegExp(`^  ${code}  \\S`, "m"))
  })

  test.each([
    [["--bogus"], "unknown option '--bogus'"],
    [["--only", "other"], "--only takes loop-guard or semantic-anchors"],
    [["--only"], "--only needs a value"],
    [["--dir"], "--dir needs a value"],
    [["--check", "--dry-run"], "drop --dry-run"],
    [["--uninstall", "--example-config"], "--example-config goes with an install"],
  ])("%p is a usage error (exit 2) that says what to do", (args, message) => {
    const w = world()
    const before = snapshot(w.root)
    const r = runInstaller(w, args)
    expect(r.code).toBe(2)
    expect(r.stderr).toContain(message)
    expect(snapshot(w.root)).toEqual(before)
  })
})

describe("--check (doctor) on the real opencode of the dev toolchain", () => {
  const withRealOpencode = (w: World) => ({ PATH: `${path.dirname(realOpencode)}:${w.env.PATH}` })
  const CHECK_TIMEOUT = 180_000

  test(
    "the repository's plugins, installed: every check ok, exit 0, and the user's dirs untouched",
    () => {
      const w = world("repo")
      expect(runInstaller(w, [], { env: withRealOpencode(w) }).code).toBe(0)
      const before = snapshot(w.root)
      const r = runInstaller(w, ["--check"], { env: withRealOpencode(w), timeoutMs: CHECK_TIMEOUT })
      expect(r.out).toContain(`opencode: ok (${realOpencode}, version 1.18.33)`)
      expect(r.out).toContain("opencode version supported: ok")
      expect(r.out).toContain("installed loop-guard.ts: ok (matches the manifest)")
      const hasAnchors = fs.existsSync(path.join(w.src, "semantic-anchors.ts"))
      expect(r.out).toContain(
        `plugins discovered (opencode debug config): ok (loop-guard.ts${hasAnchors ? " semantic-anchors.ts" : ""})`,
      )
      expect(r.out).toContain(
        'loop-guard blocks the 4th identical read: ok (reads 1-3 ran, the 4th was blocked and the model read: "loop-guard blocked this read call',
      )
      if (hasAnchors) expect(r.out).toContain("semantic-anchors blocks a contract: ok (the probe command was blocked")
      expect(r.out).toContain(`plugins loaded (opencode's log): ok (no 'failed to load plugin' for loop-guard.ts`)
      expect(r.out).not.toContain("failed:")
      expect(r.out).toMatch(/^\d+ ok, 0 failed$/m)
      expect(r.code).toBe(0)
      // The doctor read the installed files and wrote nothing outside its sandbox, which it removed.
      expect(snapshot(w.root)).toEqual(before)
    },
    CHECK_TIMEOUT,
  )

  test(
    "a plugin that never blocks and one that fails to load: each check fails with its reason, exit 5, sandbox kept",
    () => {
      const inert = `export default { id: "semantic-anchors", server: async () => ({}) }\n`
      const throwing = `export default { id: "loop-guard", server: async () => { throw new Error("boom at init") } }\n`
      const w = world({ "loop-guard.ts": throwing, "semantic-anchors.ts": inert })
      expect(runInstaller(w, [], { env: withRealOpencode(w) }).code).toBe(0)
      const r = runInstaller(w, ["--check"], { env: withRealOpencode(w), timeoutMs: CHECK_TIMEOUT })
      expect(r.out).toContain("plugins discovered (opencode debug config): ok (loop-guard.ts semantic-anchors.ts)")
      expect(r.out).toContain(
        "loop-guard blocks the 4th identical read: failed: the 4th identical read ran (status completed): loop-guard did not block it",
      )
      expect(r.out).toContain(
        "semantic-anchors blocks a contract: failed: the probe command ran (status completed): the contract did not block it",
      )
      expect(r.out).toContain(
        `plugins loaded (opencode's log): failed: opencode logged 'failed to load plugin' for loop-guard.ts: "boom at init"`,
      )
      expect(r.out).toMatch(/^\d+ ok, 3 failed$/m)
      expect(r.code).toBe(5)
      const kept = /the sandbox is kept for a look: (\S+)/.exec(r.out)?.[1]
      expect(kept?.startsWith(path.join(w.tmp, "opencode-guards-check."))).toBe(true)
      expect(fs.existsSync(path.join(kept!, "run.jsonl"))).toBe(true)
    },
    CHECK_TIMEOUT,
  )

  test("no opencode on PATH: failed with what to do, exit 5", () => {
    const w = world()
    runInstaller(w, [])
    const r = runInstaller(w, ["--check"])
    expect(r.code).toBe(5)
    expect(r.out).toContain("opencode: failed: not found on PATH; install opencode 1.18.33, or pass --opencode PATH")
  })

  test("nothing installed: failed with what to do, exit 5", () => {
    const w = world()
    const r = runInstaller(w, ["--check", "--opencode", realOpencode], { timeoutMs: 60_000 })
    expect(r.code).toBe(5)
    expect(r.out).toContain("plugins installed: failed: no plugin file in")
    expect(r.out).toContain("run ./install.sh first")
  }, 60_000)

  test("an unsupported opencode version is a failed check", () => {
    const w = world()
    runInstaller(w, [])
    const stub = stubOpencode(w.bin, "1.17.0")
    const r = runInstaller(w, ["--check", "--opencode", stub])
    expect(r.out).toContain("opencode version supported: failed: 1.17.0 is not one of 1.18.33")
    expect(r.code).toBe(5)
  })
})

// The YAML that install.sh writes must be what semantic-anchors accepts: checked with the plugin's own validator.
describe.skipIf(!fs.existsSync(path.join(repo, "semantic-anchors.ts")))(
  "YAML written by install.sh, through semantic-anchors' validator",
  () => {
    const validate = async (text: string) => {
      const anchors = await import(path.join(repo, "semantic-anchors.ts"))
      const config = anchors.buildConfig([
        { path: "/x/opencode-semantic-anchors.yaml", label: "example", layer: "global", text },
      ])
      return {
        problems: config.problems.map(anchors.formatProblem),
        contracts: [...config.contracts.keys()] as string[],
      }
    }
    const example = () => {
      const w = world()
      runInstaller(w, ["--example-config"])
      return read(path.join(w.xdg, "opencode", "opencode-semantic-anchors.yaml"))
    }

    test("the example as written: valid, and it adds no contract", async () => {
      const { problems, contracts } = await validate(example())
      const builtins = (await validate("version: 1\n")).contracts
      expect(problems).toEqual([])
      expect(contracts).toEqual(builtins)
    })

    test("the example with every commented line switched on: valid, and it adds no-force-push", async () => {
      const lines = example().split("\n")
      const start = lines.indexOf("version: 1")
      const uncommented = lines.map((l, i) => (i > start && l.startsWith("#") ? l.replace(/^# ?/, "") : l)).join("\n")
      const { problems, contracts } = await validate(uncommented)
      expect(problems).toEqual([])
      expect(contracts).toContain("no-force-push")
    })

    test("the --check probe contract: valid", async () => {
      const script = read(path.join(repo, "install.sh"))
      const probe = /project\/\.opencode\/opencode-semantic-anchors\.yaml" <<'EOF'\n([\s\S]*?)\nEOF\n/.exec(script)?.[1]
      expect(probe).toBeDefined()
      const { problems, contracts } = await validate(probe!)
      expect(problems).toEqual([])
      expect(contracts).toContain("doctor-probe")
    })
  },
)

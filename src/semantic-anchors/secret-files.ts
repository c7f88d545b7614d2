/**
 * protect-secrets, its reading part: the person's secret files and the environment, read in the background at start
 * and at each user message (never on a tool call's path), into the SecretMatcher that tool.execute.after uses.
 */
// @ts-ignore -- no Node types in this zero-dependency project; node:fs is built into Bun, which runs the plugin.
import { promises } from "node:fs"
import { clearTimeout, setTimeout } from "./constants"
import {
  SecretMatcher,
  isKeyFileName,
  isSecretFileName,
  isSshKeyName,
  secretsOfEnv,
  secretsOfFile,
  type Secret,
  type SecretPlaces,
  OPENCODE_SECRET_FILES,
  SECRET_HOME_FILES,
} from "./secrets"
import { globToRegExp, pathLabel, relativeInside } from "./names"
// Bounds: a file larger than SECRET_FILE_MAX is not read (a secret file is small; a huge one is no credential file);
// the project is walked SECRET_WALK_DEPTH directories down, past dependency and build folders, SECRET_WALK_MAX
// entries at most; only regular files are read (a FIFO, a device or a link to /dev/zero is skipped). A learning that
// fails keeps the secrets learned before; each fault is logged once, without a value.

export const SECRET_FILE_MAX = 256 * 1024
export const SECRET_WALK_MAX = 20_000
const SECRET_WALK_DEPTH = 4
export const SECRET_WAIT_MS = 500 // what a tool result waits for the first learning, once, before it is judged
const SKIPPED_DIRS = new Set([
  "node_modules",
  ".git",
  "dist",
  "build",
  "target",
  "vendor",
  ".venv",
  "venv",
  "__pycache__",
  ".next",
  "coverage",
  ".cache",
  ".tox",
])

/** The secrets known now, and their learning. */
export class SecretStore {
  matcher = new SecretMatcher([])
  /** The secret files found at the latest learning, there or not (a file command that reaches one keeps it). */
  files: readonly string[] = []
  /** Whether a learning has finished (a tool result waits for the first, within SECRET_WAIT_MS). */
  learned = false
  private readonly fileSecrets = new Map<string, Secret[]>() // path -> its secrets when last read as the person's
  private running: Promise<void> | undefined
  private again = false
  private readonly faults = new Set<string>()

  constructor(
    private readonly places: SecretPlaces,
    private readonly env: Record<string, string | undefined>,
    /** Whether the agent wrote a file in this session and it is unchanged since: its contents are the agent's. */
    private readonly isAgents: (abs: string) => boolean,
    /** The config's `settings.secretFiles` and `settings.notSecrets` in force (read at each learning). */
    private readonly settings: () => { secretFiles: readonly string[]; notSecrets: readonly string[] },
    private readonly log: (message: string) => void,
  ) {}

  /** Starts a learning in the background, or queues one after the one running; the promise is for tests. */
  learn(): Promise<void> {
    if (this.running) {
      this.again = true
      return this.running
    }
    this.running = this.learnOnce()
      .catch((error) => this.fault(`reading the secret files failed: ${(error as Error)?.message ?? error}`))
      .then(() => {
        this.learned = true
        this.running = undefined
        if (this.again) {
          this.again = false
          return this.learn()
        }
      })
    return this.running
  }

  /** The first learning, waited for at most `ms` (a result that comes first is judged with what is known). */
  async firstLearning(ms: number): Promise<void> {
    if (this.learned || !this.running) return
    let timer: unknown
    await Promise.race([this.running, new Promise<void>((resolve) => (timer = setTimeout(() => resolve(), ms)))])
    clearTimeout(timer)
  }

  private async learnOnce(): Promise<void> {
    const { secretFiles, notSecrets } = this.settings()
    const files = await this.secretFiles(secretFiles.map((glob) => this.absoluteGlob(glob)))
    this.files = files
    for (const path of files) {
      if (this.isAgents(path)) continue // the agent's own: what it held before stays a secret
      const text = await this.readSmall(path)
      if (text === undefined) continue
      const name = path.slice(path.lastIndexOf("/") + 1)
      if (isKeyFileName(name) && !text.includes("PRIVATE KEY-----")) continue // a certificate, a public key
      const label = this.label(path)
      this.fileSecrets.set(path, secretsOfFile(text, label))
    }
    for (const path of [...this.fileSecrets.keys()]) if (!files.includes(path)) this.fileSecrets.delete(path)
    const secrets = [...secretsOfEnv(this.env), ...[...this.fileSecrets.values()].flat()]
    this.matcher = new SecretMatcher(secrets, new Set(notSecrets))
  }

  /** A config glob as an absolute one: `~/` is the home directory, a relative glob the project's. */
  private absoluteGlob(glob: string): string {
    const { home, project } = this.places
    if (glob === "~" || glob.startsWith("~/")) return `${home}${glob.slice(1)}`
    return glob.startsWith("/") ? glob : `${project}/${glob.replace(/^\.\//, "")}`
  }

  /**
   * The candidate files: the project's `.env*` and key files, the home's credential files, opencode's auth files,
   * and the files the config's globs name (a glob outside the project: its directory before the first wildcard is
   * walked, within the same bounds).
   */
  private async secretFiles(globs: string[]): Promise<string[]> {
    const { home, project, dataDir } = this.places
    const named = globs.map((glob) => globToRegExp(glob))
    const accept = (name: string, path: string) => isSecretFileName(name) || named.some((glob) => glob.test(path))
    const found: string[] = []
    const count = { seen: 0 }
    if (home !== "/" && home !== project) {
      for (const rel of SECRET_HOME_FILES) found.push(`${home}/${rel}`)
      for (const name of await this.list(`${home}/.ssh`)) if (isSshKeyName(name)) found.push(`${home}/.ssh/${name}`)
    }
    for (const file of OPENCODE_SECRET_FILES) found.push(`${dataDir}/${file}`)
    if (project !== "/" && project !== home) await this.walk(project, 0, count, found, accept)
    for (const [i, glob] of globs.entries()) {
      const base = glob.slice(0, Math.max(0, glob.search(/\/[^/]*[*?[{]/))) || glob.slice(0, glob.lastIndexOf("/"))
      if (relativeInside(project, base) !== undefined) continue // walked above
      if (!/[*?[{]/.test(glob)) found.push(glob)
      else if (base && base !== "/") await this.walk(base, 0, count, found, (_name, path) => named[i].test(path))
    }
    return [...new Set(found)]
  }

  private async walk(
    dir: string,
    depth: number,
    count: { seen: number },
    found: string[],
    accept: (name: string, path: string) => boolean,
  ): Promise<void> {
    let entries: { name: string; isDirectory(): boolean; isFile(): boolean; isSymbolicLink(): boolean }[]
    try {
      entries = await promises.readdir(dir, { withFileTypes: true })
    } catch {
      return
    }
    for (const entry of entries) {
      if (++count.seen > SECRET_WALK_MAX)
        return this.fault(
          `the search for secret files met more than ${SECRET_WALK_MAX} entries (the project, the secretFiles globs' directories); the rest is not searched`,
        )
      const path = `${dir}/${entry.name}`
      if (entry.isDirectory()) {
        if (depth < SECRET_WALK_DEPTH && !SKIPPED_DIRS.has(entry.name))
          await this.walk(path, depth + 1, count, found, accept)
      } else if (accept(entry.name, path)) found.push(path)
    }
  }

  private async list(dir: string): Promise<string[]> {
    try {
      return (await promises.readdir(dir)) as string[]
    } catch {
      return []
    }
  }

  /** A regular file's text when it is small; undefined when missing, unreadable, special or too large. */
  private async readSmall(path: string): Promise<string | undefined> {
    try {
      const info = await promises.stat(path)
      if (!info.isFile()) {
        this.fault(
          `${this.label(path)} is not a regular file (a directory, a FIFO, a device) and is not read for secrets`,
        )
        return undefined
      }
      if (info.size > SECRET_FILE_MAX) {
        this.fault(`${this.label(path)} is larger than ${SECRET_FILE_MAX / 1024} KB and is not read for secrets`)
        return undefined
      }
      return (await promises.readFile(path, "utf8")) as string
    } catch (error) {
      const code = (error as { code?: string })?.code
      if (code !== "ENOENT" && code !== "ENOTDIR") this.fault(`${this.label(path)} cannot be read (${code ?? error})`)
      return undefined
    }
  }

  /** How the model and the person read a file's name: relative to the project, `~/...`, or whole. */
  label(path: string): string {
    const { project, home } = this.places
    return pathLabel(path, project, home)
  }

  private fault(message: string): void {
    if (this.faults.has(message) || this.faults.size >= 100) return
    this.faults.add(message)
    this.log(message)
  }
}

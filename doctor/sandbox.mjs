// @ts-check
// The throw-away opencode sandbox, in one place: used by the doctor (`install.sh --check`, doctor/check.mjs) and by the
// end-to-end harness (test/e2e/harness.ts). Plain Node, no dependencies.
//
// Why: a real opencode must run against the scripted model (fake-llm.mjs) without reading or writing anything of the
// user's (config, sessions, logs) and without any network. Every path opencode writes lives under one temp dir:
//   ROOT/home, ROOT/config (XDG_CONFIG_HOME; opencode's config dir is ROOT/config/opencode), ROOT/data, ROOT/state,
//   ROOT/cache, ROOT/tmp (TMPDIR), ROOT/project (where opencode runs).
// The config dirs are seeded so that opencode's embedded npm has nothing to install (it would wait ~70 s offline),
// and npm's registry points at a closed local port in case it tries anyway; model, update and LSP fetches are off.
//
// How to tune: the environment is the caller's PATH and LANG and nothing else of theirs (sandboxEnv); add a variable
// there only when opencode needs it to run, never one that points outside ROOT.

import { spawn, spawnSync } from "node:child_process"
import fs from "node:fs"
import os from "node:os"
import path from "node:path"

/** The model every sandbox is configured with: the scripted one. */
export const MODEL = "fake/fake-model"

const DIRS = ["home", "config", "data", "state", "cache", "tmp", "project"]

/**
 * A fresh sandbox root under os.tmpdir() (that is $TMPDIR) with its directories made.
 * @param {string} prefix  the temp dir's name prefix, e.g. "opencode-guards-check."
 */
export function makeSandboxRoot(prefix) {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), prefix))
  for (const d of DIRS) fs.mkdirSync(path.join(root, d))
  return root
}

/**
 * The environment of every process in the sandbox.
 * @param {string} root      the sandbox root
 * @param {string} pathValue the PATH to keep (opencode, node, git and the shell tools are found through it)
 * @returns {Record<string, string>}
 */
export function sandboxEnv(root, pathValue) {
  return {
    PATH: pathValue,
    LANG: process.env.LANG || "C.UTF-8",
    HOME: path.join(root, "home"),
    XDG_CONFIG_HOME: path.join(root, "config"),
    XDG_DATA_HOME: path.join(root, "data"),
    XDG_STATE_HOME: path.join(root, "state"),
    XDG_CACHE_HOME: path.join(root, "cache"),
    TMPDIR: path.join(root, "tmp"),
    OPENCODE_DISABLE_MODELS_FETCH: "1",
    OPENCODE_DISABLE_AUTOUPDATE: "1",
    OPENCODE_DISABLE_SHARE: "1",
    OPENCODE_DISABLE_LSP_DOWNLOAD: "1",
    // Belt and braces: if opencode's embedded npm runs anyway, it fails at once on a closed local port.
    npm_config_registry: "http://127.0.0.1:9/",
    npm_config_fetch_retries: "0",
    // Commits in the sandbox project need an identity; the user's is not read.
    GIT_AUTHOR_NAME: "opencode-guards sandbox",
    GIT_AUTHOR_EMAIL: "sandbox@example.invalid",
    GIT_COMMITTER_NAME: "opencode-guards sandbox",
    GIT_COMMITTER_EMAIL: "sandbox@example.invalid",
  }
}

/**
 * Seeds a config dir with the dependency state opencode checks before running its own npm install there
 * (opencode checks the names, not the versions). Existing files are kept.
 * @param {string} dir
 * @param {string} version  the opencode version (opencode installs @opencode-ai/plugin at its own version)
 */
export function seedConfigDir(dir, version) {
  fs.mkdirSync(path.join(dir, "node_modules"), { recursive: true })
  const dependencies = { "@opencode-ai/plugin": version }
  const pkg = path.join(dir, "package.json")
  if (!fs.existsSync(pkg)) fs.writeFileSync(pkg, JSON.stringify({ dependencies }, null, 2) + "\n")
  const lock = path.join(dir, "package-lock.json")
  if (!fs.existsSync(lock)) {
    const lockfile = { name: "", lockfileVersion: 3, requires: true, packages: { "": { dependencies } } }
    fs.writeFileSync(lock, JSON.stringify(lockfile, null, 2) + "\n")
  }
}

/**
 * Writes the sandbox's opencode.json: the scripted model as the only provider, sharing and updates off. Keys already
 * in the file are kept unless set here; `extra` keys (e.g. a permission rule) win over both.
 * @param {string} configDir  $XDG_CONFIG_HOME/opencode
 * @param {Record<string, unknown>} [extra]
 */
export function writeOpencodeConfig(configDir, extra = {}) {
  const file = path.join(configDir, "opencode.json")
  fs.mkdirSync(configDir, { recursive: true })
  const existing = fs.existsSync(file) ? JSON.parse(fs.readFileSync(file, "utf8")) : {}
  const config = {
    $schema: "https://opencode.ai/config.json",
    autoupdate: false,
    share: "disabled",
    model: MODEL,
    small_model: MODEL,
    provider: {
      fake: {
        npm: "@ai-sdk/openai-compatible",
        name: "Scripted model (opencode-guards sandbox)",
        options: { baseURL: "{env:FAKE_LLM_BASE_URL}", apiKey: "not-a-key" },
        models: { "fake-model": { name: "fake-model", tool_call: true, limit: { context: 100000, output: 4096 } } },
      },
    },
  }
  fs.writeFileSync(file, JSON.stringify({ ...existing, ...config, ...extra }, null, 2) + "\n")
}

/**
 * Runs a command to its end, stopped with SIGKILL after timeoutMs; never rejects.
 * @param {string} command
 * @param {string[]} args
 * @param {{ cwd: string, env: Record<string, string>, timeoutMs: number }} options
 * @returns {Promise<{ code: number | null, stdout: string, stderr: string, timedOut: boolean, error?: string }>}
 */
export function runToEnd(command, args, { cwd, env, timeoutMs }) {
  return new Promise((resolve) => {
    let stdout = ""
    let stderr = ""
    let timedOut = false
    const child = spawn(command, args, { cwd, env, stdio: ["ignore", "pipe", "pipe"] })
    child.stdout.setEncoding("utf8").on("data", (d) => (stdout += d))
    child.stderr.setEncoding("utf8").on("data", (d) => (stderr += d))
    const timer = setTimeout(() => {
      timedOut = true
      child.kill("SIGKILL")
    }, timeoutMs)
    child.once("error", (error) => {
      clearTimeout(timer)
      resolve({ code: null, stdout, stderr, timedOut, error: String(error) })
    })
    child.once("close", (code) => {
      clearTimeout(timer)
      resolve({ code, stdout, stderr, timedOut })
    })
  })
}

/**
 * The first X.Y.Z[-pre] in a `--version` output, or "".
 * @param {string} text
 */
export function versionIn(text) {
  return /\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.-]+)?/.exec(text)?.[0] ?? ""
}

/**
 * The version an opencode executable reports, asked inside a throw-away sandbox (even `--version` creates opencode's
 * data dirs). "" when it reports none. Synchronous: callers ask once, before anything else runs.
 * @param {string} bin
 * @param {string} pathValue  PATH for the sandbox
 * @returns {string}
 */
export function opencodeVersion(bin, pathValue) {
  const root = makeSandboxRoot("opencode-guards-version.")
  try {
    const env = sandboxEnv(root, pathValue)
    const r = spawnSync(bin, ["--version"], { cwd: path.join(root, "project"), env, encoding: "utf8", timeout: 60_000 })
    return r.status === 0 ? versionIn(r.stdout ?? "") : ""
  } finally {
    fs.rmSync(root, { recursive: true, force: true })
  }
}

// Starts loop-guard as opencode does, `server(input)`, with a fake client that records what the plugin sends: log
// lines, toasts and aborts. The environment is the given one: every OPENCODE_LOOP_GUARD* variable of the process is
// removed while the plugin reads its settings, then put back.
import plugin from "../../loop-guard.ts"

export type LogBody = { service: string; level: string; message: string; extra?: Record<string, any> }
export type ToastBody = { message: string; variant: string }

/** `options`: the plugin's options, as opencode passes them from its config (tests inject a `clock` there). */
export async function startLoopGuard(env: Record<string, string> = {}, options: Record<string, unknown> = {}) {
  const logs: LogBody[] = []
  const toasts: ToastBody[] = []
  const aborts: unknown[] = []
  const client = {
    app: { log: async ({ body }: { body: LogBody }) => (logs.push(body), true) },
    tui: { showToast: async ({ body }: { body: ToastBody }) => (toasts.push(body), true) },
    session: { abort: async (options: unknown) => (aborts.push(options), true) },
  }
  const saved = Object.entries(process.env).filter(([key]) => key.startsWith("OPENCODE_LOOP_GUARD"))
  for (const [key] of saved) delete process.env[key]
  Object.assign(process.env, env)
  try {
    const hooks: any = await plugin.server({ client, directory: "/tmp/p", worktree: "/tmp/p" } as any, options)
    return { hooks, logs, toasts, aborts }
  } finally {
    for (const key of Object.keys(env)) delete process.env[key]
    for (const [key, value] of saved) process.env[key] = value
  }
}

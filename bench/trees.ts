// The trajectory replays' trees: a trajectory's project moved under a replay's root (its paths in the calls too), and
// the files its commands name made there before the session, as committed files are in a real tree. Shared by
// bench/traces-protection.ts and bench/work-cost.ts.
import { existsSync, mkdirSync, utimesSync, writeFileSync } from "node:fs"
import path from "node:path"

/** The calls' arguments with the trajectory's project `real` replaced by `project` wherever it is a whole path. */
export function movedInto(real: string, project: string): (args: unknown) => unknown {
  if (real === "/") return (args) => args
  const inProject = new RegExp(`${real.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}(?=[/\\s"'\`;&|)]|$)`, "g")
  const to = project.replace(/\$/g, "$$$$")
  return (args) => JSON.parse(JSON.stringify(args ?? {}).replace(inProject, to))
}

const COMMITTED = new Date("2001-01-01T00:00:00Z") // long before any run: a file as the last commit left it

/**
 * The files a bash command names that look like files (a word with a `.` or a `/`, not a ref), made where missing
 * before the session, as committed files are there in a real tree: old, untouched by the agent. (The corpus holds
 * commands, not files: what a command does to them is not made, so a file the agent changed only through a script is
 * there as committed.)
 */
export function committedFiles(project: string, command: string) {
  for (const word of command.split(/[\s;&|()]+/)) {
    if (!/^[\w.-][\w./-]*$/.test(word) || !/[./]/.test(word) || /^(?:origin|upstream|refs|HEAD)\b|^\.+$/.test(word))
      continue
    const abs = path.resolve(project, word)
    if (!abs.startsWith(`${project}/`) || existsSync(abs)) continue
    try {
      mkdirSync(path.dirname(abs), { recursive: true })
      writeFileSync(abs, "committed\n")
      utimesSync(abs, COMMITTED, COMMITTED)
    } catch {
      // a word that is no possible path here (a file where a directory would be): nothing to make
    }
  }
}

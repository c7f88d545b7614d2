// Command rules (issue 21): a tool trigger's `runs:` matches the simple commands a bash call would run, read by the
// same bash reader guard-integrity uses. Driven through `server(input)` and the hooks as opencode calls them:
// - the ready rules exactly as `./install.sh --example-config` prints them (uncommented), each against its
//   spellings, wrappers, chains and nesting (fires), look-alikes in data (passes), and opaque code (fires, saying so);
// - malformed patterns, with their exact messages (file, key path, fix), disabling only their contract;
// - composition with args, unlessSeen, modes, roles and examples; `/anchor test`'s explanation.
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import plugin, { buildConfig, formatProblem, resolvePaths } from "../semantic-anchors"
import { start } from "./fixtures/semantic-anchors/harness"
import { prng, type Rng } from "./lib/prng"
import { readyRuleIds, readyRulesYaml as readyRules } from "./fixtures/semantic-anchors/ready-rules"

// A project that does not lie under /tmp (the harness's temp projects do, and /tmp is where rm -rf is ordinary).
const PROJECT = "/srv/app"
const HOME = "/home/dev"
let dir = ""
let hooks: Record<string, (input: unknown, output: unknown) => Promise<void>>
let session = 0

/** server() as opencode calls it, with the ready rules as the global file and TMPDIR unset (so /tmp). */
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "anchors-runs-"))
  const file = join(dir, "ready.yaml")
  writeFileSync(file, readyRules())
  const saved = { ...process.env }
  Object.assign(process.env, { HOME, XDG_CONFIG_HOME: join(dir, "xdg"), OPENCODE_SEMANTIC_ANCHORS_CONFIG: file })
  delete process.env.TMPDIR
  try {
    const client = { app: { log: async () => {} }, tui: { showToast: async () => {} } }
    hooks = (await plugin.server({ client, directory: PROJECT, worktree: PROJECT } as never)) as never
  } finally {
    for (const key of ["HOME", "XDG_CONFIG_HOME", "OPENCODE_SEMANTIC_ANCHORS_CONFIG", "TMPDIR"])
      if (saved[key] === undefined) delete process.env[key]
      else process.env[key] = saved[key]
  }
})
afterAll(() => rmSync(dir, { recursive: true, force: true }))

/** One bash call in a fresh session (so no step count interferes): the block message, or undefined. */
async function bash(command: string): Promise<string | undefined> {
  try {
    await hooks["tool.execute.before"](
      { tool: "bash", sessionID: `ses_${++session}`, callID: "c" },
      { args: { command } },
    )
    return undefined
  } catch (error) {
    return (error as Error).message
  }
}

test("the ready rules load without a problem, every example holding", () => {
  const config = buildConfig([{ path: "/x/ready.yaml", label: "ready", layer: "global", text: readyRules() }] as never)
  expect(config.problems.map(formatProblem)).toEqual([])
  expect(readyRuleIds()).toEqual([
    "no-force-push",
    "no-hard-reset",
    "no-git-clean",
    "no-rm-outside-project",
    "no-skip-hooks",
    "no-publish",
    "no-kubectl-delete",
    "no-terraform-destroy",
    "no-docker-prune",
    "no-database-drop",
    "no-pipe-to-shell",
    "no-chmod-outside-project",
  ])
  expect([...config.contracts.keys()]).toEqual(expect.arrayContaining(readyRuleIds()))
})

type Row = [command: string, runs: string | null]
const OPAQUE = "code the reader cannot follow"
const UNREAD = "code the reader cannot read" // words given elsewhere: a git alias from a file, a `$1` set elsewhere

// Each rule: [command, what the block says it runs (null: the rule lets it pass)].
const READY: [rule: string, rows: Row[]][] = [
  [
    "no-force-push",
    [
      ["git push --force origin main", "git push --force origin main"],
      ["git push -f", "git push -f"],
      ["git push -uf origin feature", "git push -uf origin feature"],
      ["git push origin +main", "git push origin +main"],
      ["git push --dry-run origin +main", null],
      ["git push -n origin +main", null],
      ["git -C . push origin +main", "git -C . push origin +main"],
      ["git -C repo -c push.default=current push --force", "git -C repo -c push.default=current push --force"],
      ["git -calias.f=push f origin +main", "git -calias.f=push push origin +main` (after git"],
      ["git push --force-with-lease", "git push --force-with-lease"],
      ["git push --force-w origin main", "git push --force-w origin main"], // git takes a unique prefix of an option
      ["git push --mirror backup", "git push --mirror backup"], // force-updates every ref of the remote
      ["git push --mirror -n backup", null],
      ["git push --forc origin main", null], // ambiguous (--force-with-lease, --force-if-includes): git refuses it
      ["git push --force --dry", null], // --dry is --dry-run
      ["git push --force-with-lease=main:abc123 origin main", "git push --force-with-lease=main:abc123 origin main"],
      ["/usr/bin/git push -f", "/usr/bin/git push -f"],
      ["cd app && git push -f origin", "git push -f origin"],
      ["npm test; git push origin main --force", "git push origin main --force"],
      ["git fetch || git push -f", "git push -f"],
      ["(cd app; git push -f)", "git push -f"],
      ["echo $(git push -f 2>&1)", "git push -f"],
      ["echo `git push -f`", "git push -f"],
      ["bash -c 'git push --force'", "git push --force` (in bash's code"],
      ['sh -c "cd app && git push -f"', "git push -f` (in sh's code"],
      ["eval 'git push -f'", "git push -f` (in eval's code"],
      ["bash -c \"bash -c 'git push -f'\"", "git push -f` (in bash's code, in bash's code"],
      ["sudo -u ci git push -f", "git push -f` (after sudo"],
      ["env GIT_TRACE=1 git push --force-with-lease", "git push --force-with-lease` (after env"],
      ["GIT_TRACE=1 git push -f", "git push -f"],
      ["nice -n 5 nohup timeout 60 git push -f", "git push -f` (after nice, after nohup, after timeout"],
      ["time command git push -f", "git push -f` (after time, after command"],
      ["exec git push -f", "git push -f` (after exec"],
      ["setsid git push -f", "git push -f` (after setsid"],
      ["watch -n 5 git push -f", "git push -f` (in watch's code"],
      ["xargs -I{} git push -f origin {} < branches.txt", "git push -f origin {}` (after xargs"],
      ["find . -maxdepth 0 -exec git push -f \\;", "git push -f` (after find"],
      ["bash <<'EOF'\ngit push -f\nEOF", "git push -f` (in bash's code"],
      ["python3 -c \"import os; os.system('git push --force')\"", "git push --force` (in python3's code"], // a literal
      ["python3 -c \"import os; c = 'git push --force'; os.system(c)\"", OPAQUE], // built at run time
      ["echo 'git push --force' | sh", "git push --force` (in sh's code"], // what echo prints into a shell runs
      ["printf 'git push -f\\n' | sudo bash", "git push -f` (in sudo's code"],
      ["bash <<< 'git push -f'", "git push -f` (in bash's code"], // a here-string is the shell's input
      ["f() { git push -f; }; f", "git push -f"], // a function's body is read where it is written
      ["if git push -f origin; then echo ok; fi", "git push -f origin"],
      ["for b in main dev; do git push -f origin $b; done", "git push -f origin $b"],
      ['git push "--force" origin', "git push --force origin"], // quotes removed, as the shell does
      ["git push origin HEAD --force", "git push origin HEAD --force"], // flags after the operands
      ['echo "$(git push -f)"', "git push -f"],
      ["ssh ci@host 'cd app && git push -f'", OPAQUE],
      ["docker exec app git push --force", OPAQUE],
      ["node -e \"require('child_process').execSync('git push -f')\"", "git push -f` (in node's code"],
      ["git push origin main", null],
      ["git push -o ci.skip origin main", null], // -o takes a value: ci.skip is no flag
      ["git push --follow-tags", null],
      ["echo 'git push --force' > notes.sh", null], // written to a file, not run
      ["git stash push -m 'before --force'", null],
      ["git push --force --dry-run", null],
      ["git push -fn", null],
      ["echo 'never git push --force here'", null],
      ["printf '%s\\n' 'git push -f'", null],
      ["grep -rn 'git push -f' docs", null],
      ["rg 'git push --force' .", null],
      ["sed -n '/git push -f/p' notes.md", null],
      ["awk '/git push --force/ { print }' notes.md", null],
      ["git commit -m 'do not git push --force'", null],
      ["cat <<'EOF' > notes.md\ngit push --force\nEOF", null],
      ["git status # then git push -f", null],
      ["git log --grep='push -f'", null],
      ["python3 -c \"print('hello')\"", null],
      // a message a program sends or stores (gh's --title/--body, curl's --data) is text, though gh is not followed
      ["gh pr create --title 'ci: no git push --force' --fill", null],
      ["gh pr create --title fix --body \"$(cat <<'EOF'\n- no more git push --force in deploy\nEOF\n)\"", null],
      ["gh pr merge 3 --subject 'revert git push -f' --squash", null],
      ["gh codespace ssh -- git push -f", OPAQUE], // code gh runs elsewhere: still not followed
      // a here-document gh or curl reads as a body or data (`--body-file -`, `-F -`, `-d @-`) is text too
      ["gh pr create --title fix --body-file - <<'EOF'\nno more git push --force\nEOF", null],
      ["gh issue create --title x -F - <<'EOF'\nnever git push -f\nEOF", null],
      ["gh api repos/o/r/issues -F body=@- <<'EOF'\ngit push --force\nEOF", null],
      ["curl -d @- https://example.com/hook <<'EOF'\ngit push --force\nEOF", null],
      ["curl --data-binary @- https://example.com <<'EOF'\ngit push -f\nEOF", null],
      ["gh codespace ssh <<'EOF'\ngit push -f\nEOF", OPAQUE], // ssh runs its input
    ],
  ],
  [
    "no-hard-reset",
    [
      ["git reset --hard", "git reset --hard"],
      ["git reset --hard HEAD~1", "git reset --hard HEAD~1"],
      ["git reset --har HEAD~1", "git reset --har HEAD~1"],
      ["git stash && git reset -q --hard origin/main", "git reset -q --hard origin/main"],
      // git runs these as shell code: in each submodule, after each rebased commit, at each bisect step
      ["git submodule foreach git reset --hard", "git reset --hard` (after git"],
      ["git submodule --quiet foreach --recursive 'git reset --hard'", "git reset --hard` (in git's code"],
      ["git rebase -x 'git reset --hard HEAD~1' main", "git reset --hard HEAD~1` (in git's code"],
      ["git rebase --exec='git reset --hard' main", "git reset --hard` (in git's code"],
      ["git bisect run sh -c 'make || git reset --hard'", "git reset --hard` (in git's code"],
      ["git filter-branch --tree-filter 'git reset --hard' HEAD", "git reset --hard` (in git's code"],
      ["git submodule foreach 'git status'", null],
      ["git rebase -x 'npm test' main", null],
      ["git reset --soft HEAD~1", null],
      ["git reset HEAD file.ts", null],
      ["echo 'git reset --hard'", null],
      ["gh issue comment 12 --body 'fixed; do not git reset --hard'", null],
      ["gh issue comment 12 --body='fixed; do not git reset --hard'", null],
      // a -c script that runs its arguments: `$1`, `${1}`, `"$@"` are the words given after the code
      ["bash -c '$1' _ 'git reset --hard'", "git reset --hard` (in bash's code"],
      ["bash -c 'eval \"$1\"' _ 'git reset --hard'", "git reset --hard` (in bash's code, in eval's code"],
      ["bash -lc -- '${1}' _ 'git reset --hard'", "git reset --hard` (in bash's code"],
      ["zsh -c '$1' _ 'git reset --hard'", "git reset --hard` (in zsh's code"],
      ["sh -c '\"$@\"' _ git reset --hard", "git reset --hard` (in sh's code"],
      ["bash -c 'echo $1' _ 'git reset --hard'", null],
      ["bash -c \"awk '{print $1}' log.txt\"", null], // single quotes: awk's $1, no parameter
      // commands inside arithmetic and in a redirection's word run; a backquote inside single quotes does not
      ["echo $(( $(git reset --hard) + 1 ))", "git reset --hard"],
      ["echo $((`git reset --hard` + 1))", "git reset --hard"],
      ['echo x > "$(git reset --hard)"', "git reset --hard"],
      ['cat <<< "$(git reset --hard)"', "git reset --hard"],
      ["echo $(( (1 + 2) * 3 ))", null],
      ["echo >'a`git reset --hard`b'", null],
      // a start-up or script file written on the same line is the shell's code
      ["cat > f <<'EOF'\ngit reset --hard\nEOF\nBASH_ENV=f bash x.sh", "git reset --hard` (in bash's code"],
      ["cat > f <<'EOF'\ngit reset --hard\nEOF\nbash --rcfile f -i", "git reset --hard` (in bash's code"],
      ["cat > f <<'EOF'\ngit reset --hard\nEOF\nENV=f sh", "git reset --hard` (in sh's code"],
      ["tee run.sh <<'EOF'\ngit reset --hard\nEOF\nbash run.sh", "git reset --hard` (in bash's code"],
      ["cat > run.sh <<'EOF'\ngit status\nEOF\nbash run.sh", null],
      // bash -n checks the syntax and runs nothing
      ['bash -n -c "git reset --hard"', null],
      ["bash -o noexec -c 'git reset --hard'", null],
      // watch hands its words to a shell: read as it joins them and as they are
      ["watch sh -c 'git reset --hard'", "git reset --hard` (in watch's code"],
      ["watch -n 2 'git status'", null],
      // opencode runs on Windows too: git.exe, a full path with backslashes, any case
      ["git.exe reset --hard", "git.exe reset --hard"],
      ['"C:\\Program Files\\Git\\bin\\git.exe" reset --hard', "C:\\Program Files\\Git\\bin\\git.exe reset --hard"],
      ["GIT.EXE reset --hard", "GIT.EXE reset --hard"],
      ["git.exe reset --soft", null],
      // git's global options that take a value, and aliases defined on the same line
      ["git --git-dir repo/.git reset --hard", "git --git-dir repo/.git reset --hard"],
      ["git --work-tree /srv/app reset --hard", "git --work-tree /srv/app reset --hard"],
      ["git --config-env submodule.recurse=X reset --hard", "git --config-env submodule.recurse=X reset --hard"],
      ["git -c alias.nuke=reset nuke --hard", "git -c alias.nuke=reset reset --hard` (after git"],
      ["git -c 'alias.nuke=reset --hard' nuke", "git -c alias.nuke=reset --hard reset --hard` (after git"],
      ["git -c 'alias.x=!git reset --hard' x", "git reset --hard` (in git's code"],
      [
        "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=alias.nuke GIT_CONFIG_VALUE_0=reset git nuke --hard",
        "git reset --hard` (after git",
      ],
      ["GIT_CONFIG_PARAMETERS=\"'alias.nuke'='reset'\" git nuke --hard", "git reset --hard` (after git"],
      ["git -c alias.nuke=reset nuke --soft", null],
      ["git -c alias.st=status st", null],
      // words given elsewhere: the reader cannot read them, and says so
      ["git --config-env alias.nuke=NUKE nuke --hard", UNREAD],
      ["bash -c '$2' _ x", UNREAD],
    ],
  ],
  [
    "no-git-clean",
    [
      ["git clean -f", "git clean -f"],
      ["git clean -fdx", "git clean -fdx"],
      ["git clean -xdf build", "git clean -xdf build"],
      ["git clean --force -d", "git clean --force -d"],
      ["git clean --forc -d", "git clean --forc -d"],
      ["git clean -ffdx", "git clean -ffdx"],
      ["git clean -f --dry", null],
      ["printf 'c\\n' | git clean -id", "git clean -id"], // interactive: deletes once its menu is answered
      ["git clean -in", null],
      ["git clean -n", null],
      ["git clean -nf", null],
      ["command -V git; command -v git", null],
      ["git clean -fdn", null],
      ["git clean -f --dry-run", null],
      ["git clean -d", null],
      ["git submodule foreach 'git clean -fdx'", "git clean -fdx` (in git's code"],
      ["git submodule foreach git clean -n", null],
    ],
  ],
  [
    "no-rm-outside-project",
    [
      ["rm -rf /", "rm -rf /"],
      ["rm -fr /*", "rm -fr /*"],
      ["rm -r -f ~", "rm -r -f ~"],
      ["rm --recursive --force ~/", "rm --recursive --force ~/"],
      ["rm -rf $HOME", "rm -rf $HOME"],
      ['rm -rf "${HOME:?}/projects"', "rm -rf ${HOME:?}/projects"], // shellcheck's guard against an empty variable
      ['rm -rf "${HOME-/root}"', "rm -rf ${HOME-/root}"],
      ["rm --recur --for /etc", "rm --recur --for /etc"], // rm takes a unique prefix of a long option
      ["rm -rf ~/.cache/pip", "rm -rf ~/.cache/pip"],
      ["rm -Rf ../other-project", "rm -Rf ../other-project"],
      ["rm -rf /srv/other", "rm -rf /srv/other"],
      ["rm -rf dist /etc", "rm -rf dist /etc"],
      ["cd build && sudo rm -rf /var/lib/app", "rm -rf /var/lib/app` (after sudo"],
      ["cd / && rm -rf *", "rm -rf *"], // relative paths resolve where the line's cd went
      ["cd ~ && rm -rf .cache", "rm -rf .cache"],
      ["cd .. && rm -rf app-old", "rm -rf app-old"],
      ["bash -c 'cd /opt && rm -rf app'", "rm -rf app` (in bash's code"],
      ["cd build && rm -rf *", null],
      ["cd /tmp && rm -rf x", null],
      ["bash -c 'cd /opt' && rm -rf app", null], // the cd ended with bash's code
      // find's {} is each file found under its roots: the roots and what lies under them are judged
      ["find /etc -exec rm -rf {} +", "rm -rf {}` (after find"],
      ["find /etc -name '*.bak' -execdir rm -rf {} \\;", "rm -rf {}` (after find"],
      ["find /srv -name cache -exec rm -rf {} +", "rm -rf {}` (after find"],
      ["find build /var/cache -exec sudo rm -r {} \\;", "rm -r {}` (after find, after sudo"],
      ["cd / && find . -name x -exec rm -rf {} +", "rm -rf {}` (after find"],
      ["find /etc | xargs rm -rf", OPAQUE], // xargs's operands come from its input: not followed (the opaque policy)
      ["find ./build -exec rm -rf {} +", null],
      ["find . -name '*.o' -exec rm -rf {} +", null],
      ["find /tmp/x -exec rm -rf {} +", null],
      ["find /srv/app/dist -type d -exec rm -rf {} +", null],
      ["rm -rf dist node_modules", null],
      ["rm -rf ./build/", null],
      ["rm -rf /srv/app/dist", null],
      ["rm -rf /tmp/build", null],
      ["rm -rf $TMPDIR/cache", null],
      ['rm -rf "$TMPDIR"', null],
      ['rm -rf "${TMPDIR:-/tmp}/build"', null],
      ['rm -rf "${PWD:?}/dist"', null],
      ["rm ~/notes.txt", null], // not a tree: the rule names rm -r
      ["echo rm -rf /", null],
      // another user's home lies beside this one; busybox runs its applet; Windows and case-blind spellings
      ["rm -rf ~someone/x", "rm -rf ~someone/x"],
      ["rm -rf ~root", "rm -rf ~root"],
      ["busybox rm -rf /", "rm -rf /` (after busybox"],
      ["busybox rm -rf /tmp/x", null],
      ["busybox ls /", null],
      ["RM -rf /", "RM -rf /"],
      ["rm.exe -rf ~", "rm.exe -rf ~"],
    ],
  ],
  [
    "no-skip-hooks",
    [
      ["git commit --no-verify -m wip", "git commit --no-verify -m wip"],
      ["git commit -nm wip", "git commit -nm wip"],
      ["git commit -a -n -m wip", "git commit -a -n -m wip"],
      ["git commit --no-verif -m wip", "git commit --no-verif -m wip"],
      ["git merge --no-verify feature", "git merge --no-verify feature"],
      ["git merge -n feature", null], // git merge's -n is --no-stat
      ["git commit --no-ver -m wip", null], // ambiguous (--no-verbose, --no-verify): git refuses it
      ["git push --no-verify", "git push --no-verify"],
      ["git commit -m 'wip' --amend", null],
      ["git commit -m '--no-verify is not used here'", null],
    ],
  ],
  [
    "no-publish",
    [
      ["npm publish", "npm publish"],
      [
        "npm --registry https://r.example publish --access public",
        "npm --registry https://r.example publish --access public",
      ],
      ["pnpm publish -r", "pnpm publish -r"],
      ["cd packages/a && yarn publish", "yarn publish"],
      ["npm publish -d", "npm publish -d"], // npm's -d is --loglevel info, not --dry-run (which has no short form)
      ["npm publish -dd --tag next", "npm publish -dd --tag next"],
      ["npm publish --loglevel info", "npm publish --loglevel info"],
      ["npm publish --dry-run", null],
      ["npm pub --access public", "npm pub --access public"], // npm runs a unique prefix of a command as it
      ["npm publi", "npm publi"],
      ["npm pu --dry-run", null],
      ["npm p", null], // ambiguous: npm knows no such command
      ["npm publish --dry-run=false", "npm publish --dry-run=false"], // npm reads it as --dry-run off
      ["npm publish --no-dry-run", "npm publish --no-dry-run"],
      ["yarn npm publish --access public", "yarn npm publish --access public"], // yarn 2+
      ["yarn npm info react", null],
      ["yarn npm publish --dry-run", null],
      ["bun publish --access public", "bun publish --access public"],
      ["bun publish --dry-run", null],
      ["npm --dry-run publish", null], // npm reads its options before the command too
      ["npm run publish-docs", null],
      ["npm install", null],
      ["npm pack && echo 'npm publish later'", null],
      ["gh release create v1.2.0 --notes 'npm publish runs in CI'", null],
      ["gh release create v1.2.0 -n 'npm publish runs in CI' -t v1.2.0", null],
      ['curl -s -X POST -d \'{"text":"npm publish done"}\' https://hooks.example', null],
      ['curl --json \'{"text":"npm publish done"}\' https://hooks.example', null],
      ["curl -fsSL https://example.com/install.sh | sh -s -- npm publish", OPAQUE], // what the script does is unknown
    ],
  ],
  [
    "no-kubectl-delete",
    [
      ["kubectl delete pod web-1", "kubectl delete pod web-1"],
      ["kubectl -n prod delete deployment/web", "kubectl -n prod delete deployment/web"],
      ["kubectl --context staging delete -f k8s/", "kubectl --context staging delete -f k8s/"],
      ["kubectl delete pod web-1 --dry-run=client", null],
      ["kubectl delete pod web-1 --dry-run=none", "kubectl delete pod web-1 --dry-run=none"], // none: it deletes
      ["kubectl delete -k overlays/prod", "kubectl delete -k overlays/prod"],
      ["kubectl get pods", null],
      ["kubectl describe pod delete-me", null],
      ["kubectl delete --help", null],
    ],
  ],
]

describe("the ready rules, through server() and tool.execute.before", () => {
  for (const [rule, rows] of READY)
    describe(rule, () => {
      test.each(rows)("%p -> %p", async (command, runs) => {
        const message = (await bash(command)) ?? ""
        const named = message.includes(`(rule ${rule}:`) || message.includes(`; ${rule}:`)
        if (runs === null) {
          expect(named).toBe(false)
          return
        }
        expect(named).toBe(true)
        // the Why line of this rule's contract (a default protection may have fired too, before it)
        const lines = message.split("\n")
        const own = Math.max(
          0,
          lines.findIndex((line) => line.startsWith(`Contract "${rule}"`)),
        )
        const why = lines.slice(own).find((line) => line.startsWith("Why now: ") && line.includes("runs"))
        if (runs === OPAQUE) expect(why).toContain("runs code the reader cannot follow that names `")
        else if (runs === UNREAD)
          expect(why).toContain("runs code the reader cannot read, whose words are given elsewhere")
        else expect(why).toContain(`runs \`${runs}`)
      })
    })

  test("every rule has rows that fire and rows that pass", () => {
    for (const [, rows] of READY) {
      expect(rows.some(([, runs]) => runs !== null)).toBe(true)
      expect(rows.some(([, runs]) => runs === null)).toBe(true)
    }
  })
})

/** A file with one contract whose trigger is given (YAML flow text), and its problems as formatted. */
function load(trigger: string, extra = ""): { problems: string[]; ids: string[] } {
  const text = `version: 1\ncontracts:\n  - id: rule\n    description: A rule.\n    mode: block\n    trigger: ${trigger}\n${extra}  - id: other\n    description: Another.\n    mode: warn\n    trigger: { type: tool, runs: ["git push --force"] }\n`
  const config = buildConfig(
    [{ path: "/p/.opencode/a.yaml", label: ".opencode/a.yaml", layer: "project", text }] as never,
    resolvePaths({ directory: PROJECT }, { HOME }),
  )
  return { problems: config.problems.map(formatProblem), ids: [...config.contracts.keys()] }
}

describe("a pattern that cannot be read: an error with file, key path and fix; only its contract is left out", () => {
  const rows: [runs: string, keyPath: string, message: string][] = [
    [`[""]`, "runs[0]", 'is empty; write the command as you would type it, e.g. "git push --force"'],
    [
      `["git push --force", "git commit -m 'wip"]`,
      "runs[1]",
      `has an unclosed quote ("git commit -m 'wip"); close it, or drop it: a pattern's words are plain words`,
    ],
    [
      `["--force"]`,
      "runs[0]",
      'names no program: its first word "--force" must be the program, as in "git push --force" or "rm -rf /"',
    ],
    [
      `["FOO=1"]`,
      "runs[0]",
      'names no program: its first word "FOO=1" must be the program, as in "git push --force" or "rm -rf /"',
    ],
    [
      `["cd app && git push -f"]`,
      "runs[0]",
      'is not one command ("cd app && git push -f"); write each command as its own pattern in the list: any one matches',
    ],
    [
      `["git push {-f,main}"]`,
      "runs[0]",
      'mixes flags and operands in "{-f,main}"; a {...} is either flags ("{-f,--force-with-lease}") or operands ("{main,dev}"): write one pattern for each',
    ],
    [
      `["git push {--force,--mirror"]`,
      "runs[0]",
      'has unbalanced braces in "{--force,--mirror"; write {a,b} with both braces: "{-f,--force-with-lease}" is any of them',
    ],
    [
      `["{git,hub push --force"]`,
      "runs[0]",
      'has unbalanced braces in "{git,hub"; write {a,b} with both braces: "{-f,--force-with-lease}" is any of them',
    ],
    [`["git push $(x)"]`, "runs[0]", 'has a $(...) or backquotes; write the command itself, e.g. "git push --force"'],
    [
      `["sudo rm -rf /"]`,
      "runs[0]",
      'starts with sudo, which is seen through: write the command it runs ("rm -rf /" also matches "sudo rm -rf /")',
    ],
    [
      `["git push !"]`,
      "runs[0]",
      'has a lone "!"; write "!--flag" (the flag must be absent) or "!glob" (such operands are left out)',
    ],
    [
      `[]`,
      "runs",
      'must be a non-empty list of commands as you would type them, e.g. ["git push --force", "git push +*"] (got an empty list)',
    ],
    [`[3]`, "runs[0]", 'must be a command as you would type it, e.g. "git push --force" (got 3)'],
  ]
  test.each(rows)("runs: %s", (runs, keyPath, message) => {
    const { problems, ids } = load(`{ type: tool, runs: ${runs} }`)
    expect(problems).toEqual([`.opencode/a.yaml: contracts[0].trigger.${keyPath}: ${message}`])
    expect(ids).toContain("other")
    expect(ids).not.toContain("rule")
  })

  test("runs with tools that hold no bash: a warning naming the fix; the contract still loads", () => {
    const { problems, ids } = load(`{ type: tool, tools: [edit], runs: ["git push --force"] }`)
    expect(problems).toEqual([
      ".opencode/a.yaml: contracts[0].trigger.tools: has no bash, and runs is judged on the command a bash call runs: add bash to tools (a tool of another name fires only when it has a command argument)",
    ])
    expect(ids).toContain("rule")
  })

  test("a bare string is one pattern, and `tools` defaults to bash", () => {
    const { problems, ids } = load(`{ type: tool, runs: "git reset --hard" }`)
    expect(problems).toEqual([])
    expect(ids).toContain("rule")
  })
})

describe("composition: args, unlessSeen, modes, roles, examples, /anchor test", () => {
  const file = (contracts: string) => `version: 1\ncontracts:\n${contracts}`

  test("runs and args must both hold; unlessSeen lifts it", async () => {
    const h = await start({
      project: file(
        `  - id: deploy-needs-plan\n    description: Deploy only after the plan.\n    mode: block\n    trigger:\n      type: tool\n      tools: [bash]\n      runs: ["make deploy"]\n      args: { workdir: { exists: false } }\n      unlessSeen: 'PLAN APPROVED'\n`,
      ),
    })
    expect(await h.tool("s1", "bash", { command: "make deploy" })).toContain(
      "Why now: runs `make deploy` and nothing seen",
    )
    expect(await h.tool("s1", "bash", { command: "make deploy", workdir: "sub" })).toBeUndefined()
    expect(await h.tool("s1", "bash", { command: "make test" })).toBeUndefined()
    await h.user("s1", "PLAN APPROVED")
    expect(await h.tool("s1", "bash", { command: "make deploy" })).toBeUndefined()
  })

  test("warn mode: the call runs and the note names what it runs", async () => {
    const h = await start({
      project: file(
        `  - id: careful-reset\n    description: A reset moves the branch.\n    mode: warn\n    trigger: { type: tool, runs: ["git reset --soft"] }\n`,
      ),
    })
    const { blocked, output } = await h.run("s1", "bash", { command: "cd app && git reset --soft HEAD~1" })
    expect(blocked).toBeUndefined()
    expect(output).toContain("careful-reset")
  })

  test("roles: a command rule for one role only", async () => {
    const h = await start({
      project: file(
        `  - id: arch-no-push\n    description: The architect does not push.\n    mode: block\n    roles: [software-architect]\n    trigger: { type: tool, runs: ["git push"] }\n`,
      ),
    })
    expect(await h.tool("s1", "bash", { command: "git push" })).toBeUndefined() // build: software-developer
    await h.user("s2", "hello", "plan")
    expect(await h.tool("s2", "bash", { command: "git push" })).toContain("arch-no-push")
  })

  test("examples are judged by the same reader: one that does not hold is an error saying why", async () => {
    const h = await start({
      project: file(
        `  - id: no-force\n    description: No force push.\n    mode: block\n    trigger: { type: tool, runs: ["git push --force"] }\n    examples:\n      fires: [{ tool: bash, args: { command: "echo git push --force" } }]\n`,
      ),
    })
    const status = await h.status("s1")
    expect(status).toContain(
      "contracts[0].examples.fires[0]: listed under fires, but the contract lets it pass: tool bash: in tools [bash]; runs: `git push --force` appears only as echo's argument: not run",
    )
  })

  test("/anchor test names the command that matched and where, or why none did", async () => {
    const h = await start({
      project: file(
        `  - id: no-force-push\n    description: Never rewrite shared history.\n    mode: block\n    trigger: { type: tool, runs: ["git push --force", "git push +*"] }\n`,
      ),
    })
    const lines = async (call: string) => {
      const text = await h.command("s1", `test bash ${call}`)
      const all = text.split("\n")
      const at = all.findIndex((line) => line.includes("no-force-push:"))
      return [all.find((line) => line.startsWith("verdict:")), ...all.slice(at, at + 3).map((line) => line.trim())]
    }
    expect(await lines("cd app && sudo git push -f origin")).toEqual([
      "verdict: block (protect-remote-history, no-force-push): the call would not run",
      "block no-force-push: fires",
      "tool bash: in tools [bash]",
      "runs: runs `git push -f origin` (after sudo)",
    ])
    expect(await lines("git -C . push origin +main")).toContain("runs: runs `git -C . push origin +main`")
    expect((await lines("echo 'never git push --force here'")).slice(1)).toEqual([
      "block no-force-push: passes",
      "tool bash: in tools [bash]",
      "runs: `git push --force` appears only as echo's argument: not run",
    ])
    expect(await lines("git push origin main")).toContain(
      "runs: runs `git push origin main`, but without --force: not `git push --force`",
    )
    expect(await lines("cat <<'EOF'\ngit push --force\nEOF")).toContain(
      "runs: `git push --force` appears only in a here-document fed to cat: not run",
    )
    expect(await lines("python3 -c \"import os; c = 'git push --force'; os.system(c)\"")).toContain(
      "runs: runs code the reader cannot follow that names `git push --force`: `python3 -c import os; c = 'git push --force'; os.system(c)`",
    )
    expect(await lines("ls")).toContain(
      "runs: none of the commands it runs (`ls`) is `git push --force` or `git push +*`",
    )
  })
  test("/anchor test says which operands a !glob left out, not that none matched", async () => {
    const h = await start({
      project: file(
        `  - id: no-rm-outside\n    description: No rm -r outside.\n    mode: block\n    trigger: { type: tool, runs: ["rm -r /** !/var/tmp/** !/opt/cache"] }\n`,
      ),
    })
    const why = async (call: string) =>
      (await h.command("s1", `test bash ${call}`))
        .split("\n")
        .find((line) => line.includes("runs: runs `rm"))
        ?.trim()
    expect(await why("rm -rf /var/tmp/x")).toBe(
      "runs: runs `rm -rf /var/tmp/x`, but /var/tmp/x is left out by !/var/tmp/**: not `rm -r /** !/var/tmp/** !/opt/cache`",
    )
    expect(await why("rm -rf /var/tmp/x /opt/cache")).toBe(
      "runs: runs `rm -rf /var/tmp/x /opt/cache`, but /var/tmp/x is left out by !/var/tmp/**, /opt/cache by !/opt/cache: not `rm -r /** !/var/tmp/** !/opt/cache`",
    )
  })
})

// Patterns of one's own: [the rule's runs, a command, whether the rule fires on it], through server() and the hooks.
const CUSTOM: [runs: string, command: string, fires: boolean][] = [
  // {...} of flags: any one of them, in any of its spellings
  ["git push {-f,--force-with-lease}", "git push -f", true],
  ["git push {-f,--force-with-lease}", "git push --force-with-lease origin", true],
  ["git push {-f,--force-with-lease}", "git push origin main --force", true],
  ["git push {-f,--force-with-lease}", "git push origin main", false],
  ["git push --force !{-n,--porcelain}", "git push --force", true],
  ["git push --force !{-n,--porcelain}", "git push --force --dry-run", false],
  ["git push --force !{-n,--porcelain}", "git push -f --porcelain", false],
  // {...} of subcommands: any one of them, its flags read as that subcommand's
  ["git {commit,merge} --no-verify", "git commit -n -m wip", true],
  ["git {commit,merge} --no-verify", "git merge --no-verify feature", true],
  ["git {commit,merge} --no-verify", "git merge -n feature", false],
  ["git {commit,merge} --no-verify", "git push --no-verify", false],
  // a program's options before its subcommand are its flags (not git's global options)
  ["kubectl delete --namespace=prod *", "kubectl -n prod delete pod x", true],
  ["kubectl delete --namespace=prod *", "kubectl --namespace prod delete pod/x", true],
  ["kubectl delete --namespace=prod *", "kubectl delete -n prod pod x", true],
  ["kubectl delete --namespace=prod *", "kubectl -n dev delete pod x", false],
  ["kubectl delete -A", "kubectl -A delete pods --all", true],
  // find's {}: a root, or a file under it, so a glob deeper than the root may be what it finds
  ["rm -r /etc/nginx/**", "find /etc -name '*.conf' -exec rm -r {} +", true],
  ["rm -r /etc/nginx/**", "find /etc/nginx/sites -exec rm -r {} +", true],
  ["rm -r /etc/nginx/**", "find /var /etc/ssl -exec rm -r {} +", false],
]

describe("patterns of one's own, through server() and tool.execute.before", () => {
  test.each(CUSTOM)("%p on %p fires: %p", async (runs, command, fires) => {
    const h = await start({
      project: `version: 1\ncontracts:\n  - id: custom\n    description: A rule.\n    mode: block\n    trigger: { type: tool, runs: [${JSON.stringify(runs)}] }\n`,
    })
    expect(await h.status("s0")).toContain("problems: none")
    const message = (await h.tool("s1", "bash", { command })) ?? ""
    // the block's first line names every rule that fired (a force push also fires protect-remote-history)
    expect(/\(rule (?:[^)]*; )?custom: /.test(message)).toBe(fires)
  })
})

// Random patterns and commands from words that matter to the reader (wrappers, shells, quotes, flags, globs):
// loading never throws and reports a bad pattern at its key path; and the verdict of a call (through the plan and
// its runs screen) always names exactly the command rules that `/anchor test` says fire one by one. Seeded: a
// failure replays from its seed.
describe("fuzz: random patterns and commands", () => {
  const PROGRAMS = ["git", "rm", "npm", "kubectl", "make", "/usr/bin/git", "{git,hub}", "python3"]
  const WORDS = ["push", "reset", "clean", "publish", "delete", "status", "-f", "--force", "-rf", "-n", "!--dry-run"]
  const MORE = ["--hard", "+*", "*", "/", "~", "/**", "!/tmp/**", "origin", "main", "'a b'", "{-f,--force}", "-C", "."]
  const ODD = ['"', "'", "|", ";", "$(x)", "!", "--", "&&", "<<EOF", "#", "`", "\\", "{", "}", ""]
  const WRAP = [
    "",
    "sudo ",
    "env A=1 ",
    "bash -c '",
    "cd x && ",
    "echo ",
    "xargs ",
    "time ",
    "python3 -c '",
    "(",
    "f() { ",
  ]

  function words(rng: Rng, pool: readonly string[], n: number): string {
    return Array.from({ length: n }, () => rng.pick(pool)).join(" ")
  }

  test("loading: never throws; a bad pattern is an error at trigger.runs[i], and only its contract is left out", () => {
    for (let seed = 1; seed <= 300; seed++) {
      const rng = prng(seed)
      const pattern = `${rng.pick(rng.chance(0.1) ? ODD : PROGRAMS)} ${words(rng, rng.chance(0.2) ? ODD : [...WORDS, ...MORE], rng.int(4))}`
      const text = `version: 1\ncontracts:\n  - id: rule\n    description: R.\n    mode: block\n    trigger: { type: tool, runs: [${JSON.stringify(pattern)}] }\n  - id: other\n    description: O.\n    mode: warn\n    trigger: { type: tool, runs: ["git push --force"] }\n`
      const config = buildConfig([{ path: "/p/a.yaml", label: "a.yaml", layer: "project", text }] as never)
      const problems = config.problems.map(formatProblem)
      for (const problem of problems)
        expect({ seed, problem }).toEqual({
          seed,
          problem: expect.stringMatching(/^a\.yaml: contracts\[0\]\.trigger\.runs\[0\]: /),
        })
      expect({ seed, loaded: config.contracts.has("rule") }).toEqual({ seed, loaded: problems.length === 0 })
      expect(config.contracts.has("other")).toBe(true)
    }
  })

  test("the verdict through the plan's runs screen names exactly the command rules that fire one by one", async () => {
    const seen = { fired: 0, passed: 0 }
    for (let seed = 1; seed <= 40; seed++) {
      const rng = prng(1000 + seed)
      const rules = Array.from({ length: 3 }, (_, i) => {
        const pattern = `${rng.pick(PROGRAMS.slice(0, 5))} ${words(rng, [...WORDS, ...MORE], 1 + rng.int(3))}`
        return `  - id: rule-${i}\n    description: R${i}.\n    mode: block\n    trigger: { type: tool, runs: [${JSON.stringify(pattern)}] }\n`
      })
      const h = await start({ project: `version: 1\ncontracts:\n${rules.join("")}` })
      expect({ seed, status: (await h.status("s")).includes("problems: none") }).toEqual({ seed, status: true })
      for (let k = 0; k < 25; k++) {
        const wrap = rng.pick(WRAP)
        const close = wrap.endsWith("'") ? "'" : wrap === "(" ? ")" : wrap === "f() { " ? "; }" : ""
        const command = `${wrap}${rng.pick(PROGRAMS.slice(0, 6))} ${words(rng, [...WORDS, ...MORE, ...ODD.slice(0, 4)], rng.int(5))}${close}`
        const text = await h.command(`s${seed}-${k}`, `test bash ${command}`)
        const verdict = /^verdict: block \(([^)]*)\)/m.exec(text)?.[1].split(", ") ?? []
        const fired = [...text.matchAll(/^ {2}block (rule-\d+): fires$/gm)].map((m) => m[1])
        expect({ seed, command, verdict: verdict.filter((id) => id.startsWith("rule-")) }).toEqual({
          seed,
          command,
          verdict: fired,
        })
        expect(text).not.toContain("internal error")
        seen[fired.length ? "fired" : "passed"]++
      }
    }
    // both sides are exercised: a property that only ever compared two empty lists would prove nothing
    expect(seen.fired).toBeGreaterThan(50)
    expect(seen.passed).toBeGreaterThan(50)
  })
})

// Hostile commands against the bash reader (guard-integrity and the changing-step classifier), through server() and
// tool.execute.before with the default config (no YAML file), as test/semantic-anchors-bash.test.ts does: commands
// that the first version of the reader let through although the old heuristic (ad07196) blocked them, gaps both
// had, and commands that made the reader take seconds (the host waits on tool.execute.before). The few timing
// checks only catch a hang: 10 s is orders of magnitude above what a linear reading takes.
import { describe, expect, test } from "bun:test"
import { start, type Harness } from "./fixtures/semantic-anchors/harness"

const CONFIG = ".opencode/opencode-semantic-anchors.yaml"

let counter = 0
async function guardVerdict(h: Harness, args: Record<string, unknown>): Promise<string> {
  const blocked = await h.tool(`ses_hostile_${++counter}`, "bash", { description: "x", ...args })
  if (!blocked) return "allows"
  return blocked.includes('Contract "guard-integrity"') ? "blocks" : `other: ${blocked}`
}

type Row = [command: string, guard: "blocks" | "allows"]

/** A table of commands and the verdict each gets, every row a test on one harness (`%s` in `title` is the verdict). */
function verdictTable<V extends string>(
  name: string,
  title: string,
  rows: [command: string, verdict: V][],
  verdictOf: (h: Harness, command: string) => Promise<string>,
) {
  describe(name, () => {
    let h: Harness
    test.each(rows)(`%p: ${title}`, async (command, verdict) => {
      // the default config but the default protection (its own file: semantic-anchors-protection.test.ts)
      h ??= await start({ project: "version: 1\nsettings:\n  protection: off\n" })
      expect(await verdictOf(h, command)).toBe(verdict)
    })
  })
}

function table(name: string, rows: Row[]) {
  verdictTable(name, "guard-integrity %s", rows, (h, command) => guardVerdict(h, { command }))
}

/**
 * A table of commands that once held the host for seconds (the host waits on tool.execute.before): each gets its
 * verdict, well inside 10 s (orders of magnitude above a linear reading). `name` labels a command too long to print.
 */
function answersAtOnce(title: string, rows: [command: string, guard: Row[1], name?: string][]) {
  describe(title, () => {
    const cases = rows.map(([command, guard, name]) => [name ?? JSON.stringify(command), guard, command])
    test.each(cases)("%s answers at once: guard-integrity %s", async (_name, guard, command) => {
      const h = await start()
      const started = performance.now()
      expect(await guardVerdict(h, { command })).toBe(guard)
      expect(performance.now() - started).toBeLessThan(10_000)
    })
  })
}

type StepRow = [command: string, step: "changes" | "reads"]

function stepTable(name: string, rows: StepRow[]) {
  verdictTable(name, "%s", rows, stepVerdict)
}

/** Whether a command is a changing step: after 3 writes of a turn, step-confirmation blocks a 4th change only. */
async function stepVerdict(h: Harness, command: string): Promise<string> {
  const session = `ses_hostile_step_${++counter}`
  await h.user(session, "go on. Source: https://example.com/spec")
  for (let i = 1; i <= 3; i++) await h.run(session, "write", { filePath: `src/f${i}.ts`, content: "x" })
  const blocked = await h.tool(session, "bash", { command, description: "x" })
  return blocked?.includes('Contract "step-confirmation"') ? "changes" : (blocked ?? "reads")
}

// xargs runs its command on words it reads from its input: what they are is not known, so a guard name anywhere
// in the command line counts, as for any command the reader cannot follow. At ad07196 all of these were blocked.
table("xargs: the operands come from its input, which the reader does not follow", [
  [`echo ${CONFIG} | xargs rm`, "blocks"],
  [`printf '%s\\n' ${CONFIG} | xargs truncate -s0`, "blocks"],
  ["find . -name opencode-semantic-anchors.yaml | xargs rm", "blocks"],
  ["find . -name opencode-semantic-anchors.yaml -print0 | xargs -0 rm -f", "blocks"],
  ["echo .opencode | xargs rm -rf", "blocks"],
  [`dirname ${CONFIG} | xargs rm -rf`, "blocks"],
  [`echo ${CONFIG} | xargs -I{} cp /tmp/evil.yaml {}`, "blocks"],
  [`echo ${CONFIG} | xargs -I% sh -c 'echo x > %'`, "blocks"],
  ["find . -name '*.yaml' -exec xargs rm \\;", "blocks"],
  // ordinary work stays allowed
  ["find . -name '*.tmp' | xargs rm -f", "allows"],
  ["git ls-files -z '*.py' | xargs -0 sed -i 's/a/b/'", "allows"],
  ["find . -name '*.py' | xargs grep -l TODO", "allows"],
])

// GNU sed (4.9, checked by running it) ends a label of `:`, `b`, `t` and `T` at a blank or `;`: in `:a w FILE` the
// `w FILE` is a command of its own, and sed writes FILE. The parser skipped to the next `;` or newline.
table("sed: a label ends at a blank, and the command after it is read", [
  [`sed -n ':a w ${CONFIG}' /tmp/evil.yaml`, "blocks"],
  [`sed ':top w ${CONFIG}' /tmp/evil.yaml`, "blocks"],
  [`sed -n 'bx w ${CONFIG}\n:x' /tmp/evil.yaml`, "blocks"],
  [`sed -n 'ta w ${CONFIG}\n:a' /tmp/evil.yaml`, "blocks"],
  // ordinary scripts with labels stay allowed
  ["sed ':a;N;$!ba;s/\\n/ /g' notes.txt", "allows"],
  ["sed -e ':a' -e 'N' -e '$!ba' -e 's/\\n/ /g' notes.txt", "allows"],
  ["sed -i ':a;s/^\\(\\s*\\)\\t/\\1    /;ta' src/app.py", "allows"],
])

// git's `--option=VALUE` words were dropped with the other options: a guard path there was neither written nor read.
table("git: the value of --option=VALUE is a file it reads or writes", [
  [`git diff --output=${CONFIG}`, "blocks"],
  [`git log -p --output=.opencode/opencode.json`, "blocks"],
  [`git archive --output=${CONFIG} HEAD`, "blocks"],
  ["git apply --directory=.opencode /tmp/evil.patch", "blocks"],
  ["git checkout --pathspec-from-file=.opencode/list", "blocks"],
  // a message is text, and ordinary options stay allowed
  [`git commit --message="fix the .opencode loader"`, "allows"],
  ["git diff --output=/tmp/changes.diff", "allows"],
  ["git log --format='%H %s' --since=2.weeks", "allows"],
])

// The files install.sh puts in a plugins directory are guard files (isGuardPath: any file in plugin(s)/), but find's
// name tests were judged only on the guard's known paths and their parents, none of which is a plugin file: from a
// root above the config dir (/, ~, ~/.config) find deleted the plugins themselves. ad07196 blocked these (the root is
// a parent of the config dir).
table("find: the plugin files under its root are judged by its name tests too", [
  ["find / -name semantic-anchors.ts -delete", "blocks"],
  ["find / -name 'loop-guard.ts' -delete", "blocks"],
  ["find / -name '*.ts' -delete", "blocks"],
  ["find / -path '*/plugins/*' -delete", "blocks"],
  ["find . -path '*/plugins/*' -exec rm {} +", "blocks"],
  ["find / -name '*.pyc' -delete", "allows"],
  ["find . -name '*.ts' -path '*/src/*' -exec sed -i 's/a/b/' {} +", "allows"],
])

// find -regex is an Emacs regex: an escape such as \' (end of text), \` (start), \< (word start) matches where the
// JavaScript reading (a literal quote, backquote, <) does not, so the guard file was judged unreachable. GNU find 4.9
// deletes .opencode/opencode-semantic-anchors.yaml with each of these (checked by running it).
table("find -regex: an Emacs escape the reader does not know may match anything", [
  [`find . -regex ".*yaml\\\\'" -delete`, "blocks"],
  ["find . -regex '.*\\<yaml' -delete", "blocks"],
  ["find . -regex '.*\\`.*yaml' -exec rm {} +", "blocks"],
  ["find . -regex '.*\\.pyc' -delete", "allows"],
  ["find . -regex '\\./build/.*' -delete", "allows"],
])

// tool.execute.before runs on opencode's event loop: a name pattern or regex that backtracks holds the host. Before
// the fix each of these took seconds (10 stars: 7 s; 12 stars: 57 s; 12 `.*`: over 20 s). The bound is three orders
// of magnitude above what a linear match takes, so the test does not measure speed, it catches a hang.
answersAtOnce("find: a name pattern or regex cannot hold the host", [
  ["find . -name '**********Q' -delete", "allows"],
  [`find . -path '${"*[a-z]".repeat(14)}*Q' -delete`, "allows"],
  [`find . -name '${"*?".repeat(12)}Q' -delete`, "allows"],
  ["find . -regex '(.*)*Q' -delete", "blocks"],
  [`find . -regex '${".*".repeat(10)}Q' -delete`, "blocks"],
])

// opencode's bash tool takes `workdir`, "the working directory to run the command in ... Use this instead of 'cd'
// commands" (its prompt tells the model so). guard-integrity resolved every relative path against the project, at
// ad07196 as now: with workdir .opencode, `rm -rf plugins` deleted the project's plugins unseen, while
// `cd .opencode && rm -rf plugins` is blocked.
describe("bash workdir: relative paths are resolved in it, and it is read like cd DIR", () => {
  const rows: [command: string, workdir: string, guard: "blocks" | "allows"][] = [
    ["rm -rf plugins", ".opencode", "blocks"],
    ["mv plugins plugins.bak", ".opencode", "blocks"],
    ["rm -f *.ts", ".opencode/plugins", "blocks"],
    ["cp /tmp/evil.ts loop-guard.ts", ".opencode/plugins", "blocks"],
    ["python3 -c \"import shutil; shutil.rmtree('plugins')\"", ".opencode", "blocks"],
    ["rm -rf project", "..", "blocks"],
    ["rm -f *.ts", "~/.config/opencode/plugins", "blocks"],
    // ordinary work in a subdirectory stays allowed, and looking around in .opencode too
    ["rm -rf build && make", "src", "allows"],
    ["sed -i 's/a/b/' app.ts", "src", "allows"],
    ["cat opencode-semantic-anchors.yaml", ".opencode", "allows"],
  ]
  let h: Harness
  test.each(rows)("%p in %p: guard-integrity %s", async (command, workdir, guard) => {
    h ??= await start()
    expect(await guardVerdict(h, { command, workdir })).toBe(guard)
  })
})

// getopt copied an option's value list for every value: 20,000 `-e p` took 1.7 s, 60,000 (a 300 KB command) ~15 s.
test("a long run of repeated options is read in linear time", async () => {
  const h = await start()
  const started = performance.now()
  expect(await guardVerdict(h, { command: `sed ${"-e p ".repeat(60_000)}notes.txt` })).toBe("allows")
  expect(performance.now() - started).toBeLessThan(10_000)
})

// A glob a command writes is matched against the guard's paths by a RegExp; a run of wildcards (`rm /****...Q`) made
// it try every split: 12 stars took 5-7 s (at ad07196 too), 16 more than 20 s.
answersAtOnce("a glob with a run of wildcards cannot hold the host", [
  ["rm /************Q", "allows"],
  [`rm -rf ${"*?".repeat(12)}Q`, "allows"],
  [`rm -rf ${"**/".repeat(40)}Q`, "allows"],
  ["rm -rf /************", "blocks"],
  // as the shell reads it: a run inside a component is one `*`, which never crosses a `/`. The project is in a
  // random temp directory `semantic-anchors-XXXXXX` (letters and digits): `-**Q` matched it in 1 run in 62 (the
  // name ending in Q), so the pattern ends in `.Q`, which no such name does. A whole component of wildcards may
  // cross directories (below).
  ["rm -rf /tmp/semantic-anchors-**.Q", "allows"],
  ["rm -rf .open**", "blocks"],
  ["rm -rf ../**/.opencode", "blocks"],
])

// Brace expansion is bounded (64 words, 256 characters, 20,000 steps): past its bounds a word is the glob of its
// expansion (each `{...}` a `*`), so it errs towards blocking. These took 3-41 s before the bounds (the review's).
answersAtOnce("brace expansion cannot hold the host", [
  [
    `rm -rf ${"{".repeat(2000)}${"}".repeat(2000)}${"{a,b}".repeat(2000)}`,
    "blocks",
    "2,000 nested braces, then 2,000 lists",
  ],
  [`rm -rf ${"{a,b}".repeat(16000)}`, "blocks", "16,000 lists at the project root (a glob over opencode.json)"],
  [`rm -rf build/${"{a,b}".repeat(16000)}`, "allows", "16,000 lists in build/"],
])

// `sh -c CODE NAME ARG...` runs CODE with NAME as $0 and the ARGs as $1...: the words after CODE are the files the
// code works on, and were dropped (ad07196 blocked these: a guard name anywhere in a changing command).
table("sh -c: the words after the code are its $0, $1, ...: read like any operand", [
  [`sh -c 'rm "$0"' ${CONFIG}`, "blocks"],
  [`bash -c 'rm -rf "$@"' _ .opencode`, "blocks"],
  [`timeout 5 sh -c 'rm $1' _ ${CONFIG}`, "blocks"],
  [`sh -c 'cat /tmp/evil > "$1"' sh ${CONFIG}`, "blocks"],
  [`sh -c 'cat "$1"' sh ${CONFIG}`, "allows"],
  [`bash -c 'rm -rf "$1"' _ build`, "allows"],
])

// perl's -l and -0 take only digits (`-l[octnum]`, `-0[octal/hex]`): in `-lne` the n and the e are options of their
// own. getopt gave -l the rest of the cluster, so the code became a program file and the filter a changing step.
describe("perl -lne and -lane are read-only filters, -lpi writes", () => {
  const rows: StepRow[] = [
    ["perl -lne 'print $1 if /(\\d+)/' notes.txt", "reads"],
    ["perl -lane 'print $F[0]' data.txt", "reads"],
    ["perl -00 -ne 'print if /TODO/' notes.txt", "reads"],
    ["perl -lpi -e 's/a/b/' src/app.ts", "changes"],
    ["perl -0777 -pi -e 's/a/b/' src/app.ts", "changes"],
  ]
  let h: Harness
  test.each(rows)("%p: %s", async (command, step) => {
    h ??= await start()
    expect(await stepVerdict(h, command)).toBe(step)
  })
  test("perl -lpi on the config is blocked", async () => {
    h ??= await start()
    expect(await guardVerdict(h, { command: `perl -lpi -e 's/block/warn/' ${CONFIG}` })).toBe("blocks")
  })
})

// Brace expansion and bracket globs build a guard name the word scan did not see (ad07196 let these through): a
// written word is expanded as bash does (`{a,b}`), and a bracket expression matches one character.
// watch, setsid and ionice run the command after their options (watch through `sh -c`): it is read, as after sudo.
table("programs that run a command: watch, setsid, ionice", [
  ["watch -n 1 rm -rf .opencode", "blocks"],
  ["watch -x rm -rf '#' .opencode", "blocks"], // -x runs the words as they are: `#` is no comment there
  ["watch -g rm -r echo .opencode", "blocks"], // -g takes no value
  ["watch -n1 -x rm -rf '<' .opencode", "blocks"],
  ["watch 'rm -f .opencode/*.yaml'", "blocks"],
  ["setsid rm -rf .opencode", "blocks"],
  ["ionice -c 3 rm -rf ./*", "blocks"],
  ["watch -n 5 ls -la", "allows"],
  ["setsid npm run dev", "allows"],
])

table("a name built by brace expansion or a bracket glob", [
  ["rm -rf .{opencode,x}", "blocks"],
  ["rm -rf .open{c,}ode", "blocks"],
  ["rm -rf .[o]pencode", "blocks"],
  ["rm -rf .[!x]pencode/*.yaml", "blocks"],
  ["cp x.yaml .{open,}code/opencode-semantic-anchors.yaml", "blocks"],
  ["rm -rf .{x,opencode}{,}{,}{,}{,}{,}{,}", "blocks"], // 128 words: past the bound, the glob `.*` stands for them
  ["rm -rf .{o..o}pencode", "blocks"], // a sequence: any text
  ["rm -rf .[[:lower:]]pencode", "blocks"],
  ["rm -rf {/../.{opencode,x}", "blocks"], // an unclosed `{` is a character; the list after it still expands
  ["touch src/{a,b,c}/{index,util}.ts", "allows"],
  ["cp config.yaml{,.bak}", "allows"],
  ["rm -rf build/{a,b}", "allows"],
  ["rm -rf src/[ab].ts", "allows"],
  ["echo ${HOME} {x} > out.txt", "allows"],
])

// `<<\EOF` (a backslash quotes the delimiter, as `<<'EOF'` does) ends at a line `EOF`: the scanner looked for a line
// `\EOF`, so the rest of the command line was taken for the document's body and never read (ad07196 blocked these).
table("here-documents: a backslash-quoted delimiter ends the body at its unquoted word", [
  ["cat <<\\EOF\nhello\nEOF\nrm -rf .opencode", "blocks"],
  ["cat <<E\\OF\nhello\nEOF\nrm -rf .opencode", "blocks"],
  ["cat > notes.md <<\\EOF\nnever rm -rf .opencode\nEOF\nls", "allows"],
])

// git -c KEY=VALUE sets a config value for the one command, and some values are commands git runs: core.fsmonitor
// on `git status`, diff.external on `git diff` (both checked with git 2.x). The read-only check skipped -c with its
// value, so these were read-only and their words never looked at, at ad07196 as after.
table("git -c: a config value may be a command git runs", [
  ["git -c core.fsmonitor='rm -rf .opencode; echo' status", "blocks"],
  ["git -c diff.external='rm -rf .opencode; true' diff", "blocks"],
  ["git -c color.ui=never status", "allows"],
  ["git -c core.quotepath=off diff --stat", "allows"],
])

// A perl -n/-p filter is read-only unless its code writes or runs something (PERL_EFFECTS). A module loaded with -M
// (File::Path's rmtree, File::Copy's move) or code it evals or requires can do anything: a changing step.
stepTable("perl -M, eval and require make a filter a changing step", [
  ["perl -MFile::Path=rmtree -ne 'chomp; rmtree $_' dirs.txt", "changes"],
  ["perl -MFile::Copy -ne 'chomp; move($_, \"/tmp\")' files.txt", "changes"],
  ["perl -ne 'eval $_' code.txt", "changes"],
  ["perl -ne 'print if /TODO/' src/app.ts", "reads"],
])

// An assignment before a read-only program can make it run a command (GIT_EXTERNAL_DIFF on git diff, an editor on
// git commit) or load code (LD_PRELOAD, BASH_ENV): at ad07196 the values were only read, and a read-only command's
// read words are never looked at. Now a command variable's value is read as a command line when the program is one
// that runs it, git config given in the environment makes git a changing command, and a code variable makes the
// program opaque. A pager runs only on a terminal, which opencode's bash tool never gives: its variable is a word.
table("an environment variable that makes a read-only program run a command", [
  ["GIT_EXTERNAL_DIFF='rm -rf .opencode; true' git diff", "blocks"],
  ["env GIT_EXTERNAL_DIFF='rm -rf .opencode' git diff", "blocks"],
  ["GIT_EDITOR='rm -rf .opencode' git commit", "blocks"],
  ["GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=diff.external GIT_CONFIG_VALUE_0='rm -rf .opencode;:' git diff", "blocks"],
  ["PAGER='sh -c \"rm -f .opencode/*.yaml\"' man ls", "blocks"],
  ["LD_PRELOAD=.opencode/x.so ls", "blocks"],
  ["GIT_PAGER=cat git diff", "allows"],
  ["PAGER=less git log -p", "allows"],
  ["env GIT_PAGER='rm -rf .opencode' git -p log", "allows"], // no terminal: the pager never runs
  ["EDITOR=vim ls .opencode", "allows"], // ls runs no editor
  ["GIT_PAGER=delta git diff .opencode/a.yaml", "allows"],
  ['GIT_EDITOR=: git commit -m "tidy .opencode notes"', "allows"],
])
// git runs shell code of its own: `rebase -x`, `bisect run`, `submodule foreach`, filter-branch's filters.
table("the code a git subcommand runs", [
  ["git rebase -x 'rm -f .opencode/opencode-semantic-anchors.yaml' HEAD~3", "blocks"],
  ["git rebase --exec='rm -rf .opencode' main", "blocks"],
  ["git bisect run rm -rf .opencode", "blocks"],
  ["git bisect run sh -c 'make && rm -rf .opencode'", "blocks"],
  ["git filter-branch --tree-filter 'rm -rf .opencode' HEAD", "blocks"],
  ["git rebase -x 'npm test' main", "allows"],
  ["git submodule foreach git pull", "allows"],
  ["git bisect run npm test", "allows"],
])
stepTable("a command variable's value counts for the changing step; a harmless one does not", [
  ["GIT_PAGER=cat git diff", "reads"],
  ["PAGER=less git log -p", "reads"],
  ["GIT_PAGER=delta git log", "reads"],
  ["GIT_EXTERNAL_DIFF='tee diff.log' git diff", "changes"],
  ["GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.pager GIT_CONFIG_VALUE_0=cat git log", "changes"],
  ["GIT_EXTERNAL_DIFF=./difftool.sh git diff", "changes"],
  ["LD_PRELOAD=./hook.so ls", "changes"],
])

// `cat <<EOF | sh`: the document's body is the code the shell runs. The shell reading a pipe was opaque (a guard
// name anywhere blocks), but a body that deletes the project without naming a guard file (`rm -rf *`) was not read.
table("a here-document piped into a shell is read as its code", [
  ["cat <<'EOF' | sh\nrm -rf *\nEOF", "blocks"],
  ["cat <<'EOF' | bash -s\ngit clean -fdx\nEOF", "blocks"],
  ["cat <<'EOF' | sh\nrm -rf build\nEOF", "allows"],
  ["cat <<'EOF' > notes.md\nrm -rf *\nEOF", "allows"],
])

// guard-integrity judges what a command does to the guard's files, wherever it runs from. A copy, sync or mkdir into
// the project root lands beside .opencode (real work: the trajectories copy into the directory they work in), while
// deleting or moving the project itself, however the path is spelled (`cd ..`, `..`, `$PWD`, `$(pwd)`, absolute),
// takes the guard's files with it. `@P` is the project's absolute path, `@N` its name (`project`).
describe("guard-integrity: into the project root is ordinary work, the project itself is the guard's", () => {
  const rows: Row[] = [
    ["cd .. && rm -rf @N", "blocks"],
    ["cd ..; rm -rf ./@N/", "blocks"],
    ["cd .. || exit; rm -rf @N", "blocks"],
    ["pushd .. && rm -rf @N", "blocks"],
    ["bash -c 'cd .. && rm -rf @N'", "blocks"],
    ["cd .. && sudo rm -rf @N", "blocks"],
    ["cd .. && mv @N @N.old", "blocks"],
    ["cd .. && find @N -delete", "blocks"],
    ["cd @P/.. && rm -rf @N", "blocks"],
    ["cd .. && rm -rf @N*", "blocks"],
    ["rm -rf ../@N", "blocks"],
    ["rm -rf $PWD", "blocks"],
    ["rm -rf ${PWD}/", "blocks"],
    ['rm -rf "$(pwd)"', "blocks"],
    ["rm -rf `pwd`", "blocks"],
    ['cd .. && rm -rf "$PWD/@N"', "blocks"],
    ["rm -rf @P", "blocks"],
    ["mv @P /tmp/old", "blocks"],
    ["(cd src); rm -rf ../@N", "blocks"], // the cd ends with its subshell
    ["(cd .. && rm -rf @N)", "blocks"],
    ["cd .. && (rm -rf @N)", "blocks"],
    ["git clean -fdx", "blocks"],
    ["git stash -u", "blocks"],
    ["git stash push --include-untracked", "blocks"],
    ["git stash --all", "blocks"],
    [`git checkout -- ${CONFIG}`, "blocks"],
    [`git restore ${CONFIG}`, "blocks"],
    ["git restore --source=HEAD~3 .opencode", "blocks"],
    ["rsync -a --delete src/ @P/", "blocks"],
    ["cp -r backup/.opencode @P/", "blocks"],
    ["mv backup/.opencode @P/", "blocks"],
    ["cp evil.ts .opencode/plugins/", "blocks"],
    ["mv evil.ts .opencode/plugins/", "blocks"],
    ["rmdir .opencode", "blocks"],
    // ordinary work: into the root, creating it, or in another directory
    ["cp notes.txt @P/", "allows"],
    ["cp -r src public @P/", "allows"],
    ["cp -t @P notes.txt", "allows"],
    ["mkdir -p @P", "allows"],
    ["mkdir -p @P/docs/plans", "allows"],
    ["rsync -a src/ @P/", "allows"],
    ["rsync -a --delay-updates src/ @P/", "allows"],
    ["mv a.md b.md @P/", "allows"],
    ["touch @P", "allows"],
    ["rmdir @P", "allows"],
    ["cd .. && cp notes.txt @N/", "allows"],
    ["cd .. && ls @N", "allows"],
    ["cd src && rm -rf *", "allows"],
    ["cd /tmp && rm -rf @N", "allows"],
    ["cd ..; cd @N; rm -rf build", "allows"],
    ["(cd ..); rm -rf @N", "allows"],
    ["cd build && (make; cd ..); rm -rf dist", "allows"],
    ["x=$(cd ..; pwd); rm -rf @N", "allows"],
    ["rm -rf $PWD/build", "allows"],
    ["git clean -nf", "allows"],
    ["git stash", "allows"],
    ["git stash push -u -- src", "allows"],
    ["git stash list", "allows"],
    ["git checkout -- src/app.ts", "allows"],
  ]
  let h: Harness
  test.each(rows)("%p: guard-integrity %s", async (command, guard) => {
    // the default config but the default protection (its own file: semantic-anchors-protection.test.ts)
    h ??= await start({ project: "version: 1\nsettings:\n  protection: off\n" })
    const { project } = h.dirs
    const name = project.split("/").pop()!
    expect(await guardVerdict(h, { command: command.replaceAll("@P", project).replaceAll("@N", name) })).toBe(guard)
  })
})

// What runs where the reader used to look away: a -c script's arguments, arithmetic, a redirection's word, a start-up
// file written on the line; and what never runs: bash -n, a backquote in single quotes.
table("guard-integrity: code in arguments, arithmetic, redirections and start-up files", [
  ["bash -c '$1' _ 'rm -rf .opencode'", "blocks"],
  ["sh -c 'rm -rf \"$@\"' _ build .opencode", "blocks"],
  ["echo $(( $(rm -rf .opencode) + 1 ))", "blocks"],
  ['echo x > "$(rm -rf .opencode)"', "blocks"],
  ["cat > f <<'EOF'\nrm -rf *\nEOF\nBASH_ENV=f bash x.sh", "blocks"],
  ["cat > run.sh <<'EOF'\nrm -rf *\nEOF\nbash run.sh", "blocks"],
  ["bash -c '$1' _ 'rm -rf build'", "allows"],
  ["echo $(( 6 * 7 )) > answer.txt", "allows"],
  ["bash -n -c 'rm -rf .opencode'", "allows"],
  ["cat > run.sh <<'EOF'\nrm -rf build\nEOF\nbash run.sh", "allows"],
])

// The bash reader (issue 16): what guard-integrity and the changing-step classifier make of a command, through
// server() and tool.execute.before as opencode calls them, with the default config (no YAML file). Each row: the
// command, whether guard-integrity blocks it, whether it is a changing step. The first rows of each group are real
// commands of ../shared/data/real-traces that guard-integrity used to block (a sed script's `.` or `//` read as the
// project root); their hostile twins, which aim at the guard's files, sit next to them.
import { describe, expect, test } from "bun:test"
import { start, type Harness } from "./fixtures/semantic-anchors/harness"

type Row = [command: string, guard: "blocks" | "allows", step: "changes" | "reads"]

const CONFIG = ".opencode/opencode-semantic-anchors.yaml"

const GROUPS: [string, Row[]][] = [
  [
    "sed: the script is text; the file operands are written only with -i",
    [
      [
        "sed -i '/from . import icrs_observed_transforms/a from . import itrs_observed_transforms' astropy/coordinates/builtin_frames/__init__.py",
        "allows",
        "changes",
      ],
      [
        "sed -i 's/min_samples = max(2, min_samples \\* n_samples)/min_samples = int(round(max(2, min_samples * n_samples)))/' sklearn/cluster/optics_.py",
        "allows",
        "changes",
      ],
      ["sed -i '2445s/DEBUG: /DEBUG: {type(patch).__name__} /' lib/matplotlib/axes/_base.py", "allows", "changes"],
      [`grep -m1 "^## Session:" notes.md | sed 's/## Session: //'`, "allows", "reads"],
      [`sed -i 's/block/warn/' ${CONFIG}`, "blocks", "changes"],
      [`sed -i.bak 's/block/warn/' ${CONFIG}`, "blocks", "changes"],
      [`sed --in-place=.bak -e 's/block/warn/' ${CONFIG}`, "blocks", "changes"],
      [`sed -e 's/block/warn/' -i ${CONFIG}`, "blocks", "changes"],
      [`sed -ie 's/block/warn/' ${CONFIG}`, "blocks", "changes"],
      [`sed -i -- 's/block/warn/' ${CONFIG}`, "blocks", "changes"],
      [`/usr/bin/sed -i 's/block/warn/' ${CONFIG}`, "blocks", "changes"],
      [`cd .opencode && sed -i 's/block/warn/' *.yaml`, "blocks", "changes"],
      [`sed 's/block/warn/' ${CONFIG}`, "allows", "reads"],
      [`sed -n 's/block/warn/w ${CONFIG}' /tmp/evil.yaml`, "blocks", "changes"],
      [`sed -n 'w ${CONFIG}' /tmp/evil.yaml`, "blocks", "changes"],
      ["sed -n '/TODO/w todo.txt' src/app.ts", "allows", "changes"],
      ["sed '1e rm -rf .opencode' src/app.ts", "blocks", "changes"],
      ["sed -i 's/opencode.json/opencode.jsonc/' README.md", "allows", "changes"],
      ["sed -n '1,20p' src/app.ts", "allows", "reads"],
      [`sed "s/'a'/'b'/" src/app.ts`, "allows", "reads"],
      ["sed -f fix.sed -i src/app.ts", "allows", "changes"],
      [`sed -i "s/block/warn/" $(grep -rl block .)`, "blocks", "changes"],
      [`sed -i "s/a/b/" $(find src -name '*.py')`, "allows", "changes"],
    ],
  ],
  [
    "find: -delete and -exec reach what its name tests can match",
    [
      [`find . -name "*.pyc" -delete`, "allows", "changes"],
      ["find . -name '*.yaml' -delete", "blocks", "changes"],
      ["find . -name opencode-semantic-anchors.yaml -exec rm {} \\;", "blocks", "changes"],
      ["find . -type d -name __pycache__ -exec rm -rf {} +", "allows", "changes"],
      ["find . -name '.*' -exec rm -rf {} +", "blocks", "changes"],
      // a shell run on each file: judged by what its code does with it
      ['find . -exec sh -c \'printf "%s\\n" "$COMMAND"\' \\;', "allows", "reads"],
      ["find . -name '*.yaml' -exec bash -c 'cat \"$0\"' {} \\;", "allows", "reads"],
      ["find . -name '*.yaml' -exec sh -c 'rm \"$1\"' _ {} \\;", "blocks", "changes"],
      ["find . \\( -name '*.pyc' -o -name '*.pyo' \\) -delete", "allows", "changes"],
      ["find . \\( -name '*.pyc' -o -name '*.json' \\) -delete", "blocks", "changes"],
      ["find . -name .git -prune -o -name '*.pyc' -delete", "allows", "changes"],
      ["find . ! -name '*.py' -delete", "blocks", "changes"],
      ["find . -path '*/build/*' -delete", "allows", "changes"],
      ["find . -path './.opencode/*' -delete", "blocks", "changes"],
      ["find . -regex '.*\\.pyc' -delete", "allows", "changes"],
      ["find . -iregex '.*\\.YAML' -delete", "blocks", "changes"],
      ["find .opencode -type f -exec rm {} +", "blocks", "changes"],
      ["find . -regex '.*[[:alpha:]]\\.yaml' -delete", "blocks", "changes"],
      ["find . -name '*[[:alpha:]].yaml' -delete", "blocks", "changes"],
      ["find . -delete", "blocks", "changes"],
      ["find . -name '*.py' -exec grep -l TODO {} \\;", "allows", "reads"],
      ["find . -name '*.py' -exec sed -i 's/a/b/' {} +", "allows", "changes"],
      ["find . -name '*.yml' -exec sed -i 's/block/warn/' {} +", "blocks", "changes"],
      ["find . -name '*.log' -fprint .opencode/opencode.json", "blocks", "changes"],
      ["find . -name '*.ts' | head", "allows", "reads"],
    ],
  ],
  [
    "ln: ln -s TARGET LINK writes LINK",
    [
      ["ln -s . reproduce_issue/loop_test/loop", "allows", "changes"],
      ["mkdir -p reproduce_issue/loop_test\nln -s . reproduce_issue/loop_test/loop", "allows", "changes"],
      [`ln -sf /dev/null ${CONFIG}`, "blocks", "changes"],
      ["ln -s /tmp/evil.ts .opencode/plugins/", "blocks", "changes"],
      ["ln -st .opencode/plugins /tmp/evil.ts", "blocks", "changes"],
      ["ln -s .opencode cfg", "blocks", "changes"],
    ],
  ],
  [
    "awk, grep, perl -ne: they write nothing; their scripts and patterns are text",
    [
      ["awk '{print $1}' data.txt", "allows", "reads"],
      ["awk -F: '$3 > 100 {print $1}' /etc/passwd", "allows", "reads"],
      [`awk '{print > "out.txt"}' data.txt`, "allows", "changes"],
      [`awk '{print > ".opencode/opencode-semantic-anchors.yaml"}' data.txt`, "blocks", "changes"],
      [`awk 'BEGIN { system("make") }'`, "allows", "changes"],
      [`grep -rn "opencode.json" src`, "allows", "reads"],
      ["grep -rl 'rm -rf .' . | head", "allows", "reads"],
      ["perl -ne 'print if /TODO/' src/app.ts", "allows", "reads"],
      ["perl -pe 's/a/b/' src/app.ts", "allows", "reads"],
      ["perl -pi -e 's/a/b/' src/app.ts", "allows", "changes"],
      [`perl -pi -e 's/block/warn/' ${CONFIG}`, "blocks", "changes"],
      [`perl -e 'unlink ".opencode/opencode-semantic-anchors.yaml"'`, "blocks", "changes"],
      ["perl -ne 'unlink $_' list.txt", "allows", "changes"],
    ],
  ],
  [
    "shells and here-documents: shell code is read like a command, a document's body is data",
    [
      ["cat > notes.md <<'EOF'\nnever rm -rf .opencode\nEOF", "allows", "changes"],
      ["cat <<'EOF'\nrm -rf .\nEOF", "allows", "reads"],
      ["bash <<'EOF'\nrm -rf .opencode\nEOF", "blocks", "changes"],
      ["bash -c 'rm -rf .'", "blocks", "changes"],
      ["bash -c 'ls -la'", "allows", "reads"],
      ["eval 'rm -rf .'", "blocks", "changes"],
      [`python3 - <<'EOF'\nimport os; os.remove('${CONFIG}')\nEOF`, "blocks", "changes"],
      ["python3 -c 'import os; print(os.getcwd())'", "allows", "changes"],
      [`echo 'rm ${CONFIG}' | sh`, "blocks", "changes"],
      [`echo "see .opencode docs" > notes.txt`, "allows", "changes"],
      [`echo 'version: 1' > ${CONFIG}`, "blocks", "changes"],
    ],
  ],
  [
    "variables, loops and prefixes: their words are read, the command they run is read like any other",
    [
      ["for f in src/*.py; do sed -i 's/a/b/' \"$f\"; done", "allows", "changes"],
      ['for f in .opencode/*; do rm "$f"; done', "blocks", "changes"],
      ["d=build; rm -rf $d", "allows", "changes"],
      ["d=.opencode; rm -rf $d", "blocks", "changes"],
      ["for i in 1 2 3; do echo $i; done", "allows", "reads"],
      ["timeout 5 tail -n 20 log.txt", "allows", "reads"],
      [`sudo -u root sed -i 's/block/warn/' ${CONFIG}`, "blocks", "changes"],
      ["env -C .opencode rm opencode.json", "blocks", "changes"],
      ["xargs -I{} cp {} .opencode/opencode.json < list.txt", "blocks", "changes"],
    ],
  ],
  [
    "rm, cp, git and the rest: written operands by path, read ones by name",
    [
      ["rm -rf ./build/*", "allows", "changes"],
      ["rm -rf ./*", "blocks", "changes"],
      ["rm -rf -- .opencode", "blocks", "changes"],
      ["git clean -fdx", "blocks", "changes"],
      ["git clean -fd build", "allows", "changes"],
      ["git clean -n", "allows", "reads"],
      [`git commit -m "fix the .opencode loader"`, "allows", "changes"],
      [`git checkout -- ${CONFIG}`, "blocks", "changes"],
      ["git -C src checkout -- .", "allows", "changes"],
      ["git -C .opencode checkout -- .", "blocks", "changes"],
      [`cp ${CONFIG} /tmp/backup.yaml`, "blocks", "changes"],
      [`cp /tmp/evil.yaml ${CONFIG}`, "blocks", "changes"],
      [`dd if=/dev/zero of=${CONFIG}`, "blocks", "changes"],
      [`chmod -w ${CONFIG}`, "blocks", "changes"],
      ["chmod +x run.sh", "allows", "changes"],
      [`sort -o ${CONFIG} words.txt`, "blocks", "changes"],
      ["sort -u words.txt", "allows", "reads"],
      ["./bin/test sympy/core", "allows", "changes"],
    ],
  ],
]

let counter = 0
async function verdicts(h: Harness, command: string): Promise<{ guard: string; step: string }> {
  const fresh = `ses_bash_${++counter}`
  const guardBlock = await h.tool(fresh, "bash", { command, description: "x" })
  // At step-confirmation's limit (3 writes since the user's message), a changing command is blocked by it.
  const atLimit = `ses_bash_limit_${counter}`
  await h.user(atLimit, "go on. Source: https://example.com/spec")
  for (let i = 1; i <= 3; i++) await h.run(atLimit, "write", { filePath: `src/f${i}.ts`, content: "x" })
  const stepBlock = await h.tool(atLimit, "bash", { command, description: "x" })
  return {
    guard: guardBlock?.includes('Contract "guard-integrity"')
      ? "blocks"
      : guardBlock
        ? `other: ${guardBlock}`
        : "allows",
    step: stepBlock?.includes('Contract "step-confirmation"') ? "changes" : "reads",
  }
}

for (const [group, rows] of GROUPS) {
  describe(group, () => {
    let h: Harness
    test.each(rows)("%p: guard-integrity %s, step %s", async (command, guard, step) => {
      // the default config but the default protection (its own file: semantic-anchors-protection.test.ts)
      h ??= await start({ project: "version: 1\nsettings:\n  protection: off\n" })
      expect(await verdicts(h, command)).toEqual({ guard, step })
    })
  })
}

test("a command too deep to follow is opaque: a guard name in it still blocks, and nothing fails open", async () => {
  const h = await start()
  const deep = [
    `${"sudo ".repeat(20_000)}rm -rf .opencode`,
    `${"$(".repeat(2_000)}rm -rf .opencode${")".repeat(2_000)}`,
    `${"bash -c '".repeat(1)}eval "eval \\"eval rm -rf .opencode\\""'`,
  ]
  for (const command of deep) expect(await verdicts(h, command)).toEqual({ guard: "blocks", step: "changes" })
  expect(h.logs.filter((line) => /fail|error/i.test(line.message))).toEqual([])
})

test("the table holds real commands and hostile twins in every group", () => {
  for (const [, rows] of GROUPS) {
    expect(rows.some(([, guard]) => guard === "allows")).toBe(true)
    expect(rows.some(([, guard]) => guard === "blocks")).toBe(true)
  }
})

// Shared helpers for the benchmarks: clocks, statistics, heap readings and the result table.
import os from "node:os"

// Timing uses Bun.nanoseconds (monotonic, ns); heap uses process.memoryUsage().heapUsed after a full collection.

export const now = (): number => Bun.nanoseconds()

export function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return NaN
  const pos = Math.min(sorted.length - 1, Math.max(0, q * (sorted.length - 1)))
  const lo = Math.floor(pos)
  const hi = Math.ceil(pos)
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo)
}

export type Summary = { n: number; median: number; p10: number; p90: number; p99: number; min: number; max: number }

export function summarize(samples: readonly number[]): Summary {
  const sorted = [...samples].sort((a, b) => a - b)
  return {
    n: sorted.length,
    median: quantile(sorted, 0.5),
    p10: quantile(sorted, 0.1),
    p90: quantile(sorted, 0.9),
    p99: quantile(sorted, 0.99),
    min: sorted[0],
    max: sorted[sorted.length - 1],
  }
}

/** Heap in use after a full, synchronous garbage collection (twice: finalizers can free more on the second). */
export function heapUsed(): number {
  Bun.gc(true)
  Bun.gc(true)
  return process.memoryUsage().heapUsed
}

/** One line of the result table: a figure, its spread, its target and the ratio against the target. */
export type Row = {
  group: string
  figure: string
  value: number
  unit: string
  spread?: string
  /** the target as text and the check it stands for */
  target?: { text: string; met: boolean }
  note?: string
}

export function fmt(value: number, unit: string): string {
  if (!Number.isFinite(value)) return String(value)
  if (unit === "ns")
    return value >= 1e6
      ? `${(value / 1e6).toFixed(2)} ms`
      : value >= 1e3
        ? `${(value / 1e3).toFixed(2)} us`
        : `${value.toFixed(0)} ns`
  if (unit === "B")
    return value >= 1 << 20
      ? `${(value / (1 << 20)).toFixed(2)} MiB`
      : value >= 1024
        ? `${(value / 1024).toFixed(1)} KiB`
        : `${value.toFixed(0)} B`
  if (unit === "x") return `${value.toFixed(2)}x`
  if (unit === "s") return `${value.toFixed(2)} s`
  return `${value} ${unit}`
}

export function printTable(rows: readonly Row[]): void {
  const header = ["group", "figure", "median", "spread", "target", "met"]
  const lines = rows.map((r) => [
    r.group,
    r.figure,
    fmt(r.value, r.unit),
    r.spread ?? "",
    r.target?.text ?? "",
    r.target ? (r.target.met ? "yes" : "NO") : "",
  ])
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i].length)))
  const line = (cells: string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i]))
      .join(" | ")
      .trimEnd()
  console.log(line(header))
  console.log(widths.map((w) => "-".repeat(w)).join("-|-"))
  for (const l of lines) console.log(line(l))
  for (const r of rows) if (r.note) console.log(`  * ${r.group} / ${r.figure}: ${r.note}`)
}

/**
 * A table of counts: the first column left-aligned, the others right-aligned, under a header and (by default) a rule
 * of dashes. The replays (bench/traces.ts, bench/traces-anchors.ts) and the loop table of bench/texts.ts print with it.
 */
export function printColumns(header: string[], rows: string[][], { separator = " | ", rule = true } = {}): void {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)))
  const line = (cells: string[]) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join(separator)
  console.log(line(header))
  if (rule) console.log(widths.map((w) => "-".repeat(w)).join(separator.replace(/ /g, "-")))
  for (const r of rows) console.log(line(r))
}

/** Load average and core count, printed with the results: the figures mean little on a busy machine. */
export function machine(): Record<string, unknown> {
  return {
    cores: os.cpus().length,
    loadavg: os.loadavg().map((l) => Number(l.toFixed(2))),
    bun: Bun.version,
    platform: `${os.platform()} ${os.arch()}`,
  }
}

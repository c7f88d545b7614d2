/**
 * The stream rule's adapter: routes streamed parts to their watchers (StreamWatcher) and acts on a verdict.
 */
import type { Hooks } from "@opencode-ai/plugin"
import { RecentMap } from "../shared/recent-map"
import {
  StreamWatcher,
  cutText,
  streamCut,
  streamToast,
  streamWhat,
  type StreamCut,
  type StreamKind,
} from "./stream-watcher"
import type { StreamLoop } from "./types"
import { askedRepetition, type Asked } from "./asked"
import type { Mode } from "./settings"
import { MAX_SESSIONS, MAX_STREAM_CUTS, MAX_STREAM_PARTS, resetTarget, streamEvent, type WatchedPart } from "./sessions"
import type { Log, Toast } from "./host"

/**
 * The stream adapter: routes streamed parts to their watchers and acts on a verdict. One watcher per part
 * (reasoning and answer each on their own), created when opencode announces the part, dropped at its end, on the
 * session's idle state or deletion, and beyond MAX_STREAM_PARTS (least recently fed first). A loop: in block mode
 * the session's run is aborted (what is not generated is not paid for), the human gets an error toast, the log a
 * line, and the part is cut in the model's next context; in warn mode the toast says so and nothing is stopped.
 * Fails open: an internal error is logged once per session and the stream goes on.
 */
export function streamGuard(mode: Mode, log: Log, toast: Toast, abort: (sessionID: string) => void) {
  const parts = new RecentMap<WatchedPart>(MAX_STREAM_PARTS)
  const cuts = new RecentMap<StreamCut>(MAX_STREAM_CUTS)
  const failed = new RecentMap<true>(MAX_SESSIONS)
  /** the repetition each session's latest user message asked for (askedRepetition), replaced by the next one */
  const asked = new RecentMap<Asked>(MAX_SESSIONS)

  function onLoop(part: WatchedPart, partID: string, loop: StreamLoop): void {
    const stop = mode === "block"
    const extra = { sessionID: part.sessionID, partID, kind: part.kind, ...loop }
    if (stop) {
      cuts.set(partID, streamCut(loop))
      abort(part.sessionID)
      log("error", `loop-guard: stopped the session's run: ${streamWhat(part.kind, loop)}`, extra)
    } else {
      log("warn", `loop-guard: ${streamWhat(part.kind, loop)} (warn mode, not stopped)`, extra)
    }
    toast(streamToast(part.kind, loop, stop), stop ? "error" : "warning")
  }

  /** Every event: parts starting and ending, deltas, and the session resets that drop a session's parts. */
  function watchStream(event: { type?: unknown; properties?: unknown }): void {
    let sessionID: unknown = undefined
    try {
      sessionID = (event?.properties as { sessionID?: unknown } | undefined)?.sessionID
      const reset = resetTarget(event)
      if (reset?.scope === "turn") {
        parts.deleteWhere((part) => part.sessionID === reset.sessionID)
        return
      }
      const what = streamEvent(event)
      if (!what) return
      if (what.type === "end") return parts.delete(what.partID)
      sessionID = what.sessionID
      if (what.type === "start") {
        if (!parts.get(what.partID))
          parts.set(what.partID, { sessionID: what.sessionID, kind: what.kind, watcher: watcherFor(what) })
        return
      }
      // only parts opencode announced as reasoning or text: a tool's streamed input (a file being written) is no
      // prose, and a part dropped (ended, idle, least recently fed) stays dropped
      const part = parts.get(what.partID)
      if (!part) return
      const loop = part.watcher.feed(what.delta)
      if (loop) onLoop(part, what.partID, loop)
      else if (part.watcher.allowed && !part.told) onAllowed(part, what.partID, part.watcher.allowed)
    } catch (error) {
      const id = typeof sessionID === "string" ? sessionID : "?"
      if (failed.get(id)) return
      failed.set(id, true)
      log("error", `loop-guard: internal error in the stream check, stream let through (fail-open): ${String(error)}`, {
        sessionID: id,
      })
    }
  }

  /** A part's watcher: an answer's part may repeat what the session's latest user message asked for; reasoning not. */
  function watcherFor(start: { sessionID: string; kind: StreamKind }): StreamWatcher {
    const allowance = start.kind === "text" ? asked.get(start.sessionID) : undefined
    return new StreamWatcher(undefined, allowance ?? null)
  }

  /** An asked-for repetition ran: logged once per part, its size only (never the person's words nor the passage). */
  function onAllowed(part: WatchedPart, partID: string, loop: StreamLoop): void {
    part.told = true
    log(
      "info",
      "loop-guard: the answer repeats what the person asked to be repeated: let through up to the asked count",
      {
        sessionID: part.sessionID,
        partID,
        period: loop.period,
        count: loop.count,
      },
    )
  }

  /**
   * A user message (chat.message): what it asks to be repeated becomes the session's allowance, replacing the last
   * one; a message that asks for none removes it. Its text parts are read (not synthetic ones: files opencode
   * attached). Never throws: a throw here would fail the person's prompt.
   */
  function noteMessage(sessionID: unknown, messageParts: unknown): void {
    try {
      if (typeof sessionID !== "string") return
      asked.delete(sessionID)
      const text = (Array.isArray(messageParts) ? messageParts : [])
        .filter((part) => part?.type === "text" && !part.synthetic && typeof part.text === "string")
        .map((part) => part.text as string)
        .join("\n")
      const allowance = askedRepetition(text)
      if (allowance) asked.set(sessionID, allowance)
    } catch (error) {
      log("error", `loop-guard: internal error while reading a user message, no repetition allowed: ${String(error)}`)
    }
  }

  /** The model's next context: a part stopped for a loop keeps its first passage and a note, not the loop. */
  function cutLoops(output: { messages?: { parts?: unknown[] }[] } | undefined): void {
    if (cuts.size === 0) return
    try {
      for (const message of output?.messages ?? []) {
        for (const part of message?.parts ?? []) {
          const p = part as { id?: unknown; text?: unknown }
          const cut = typeof p?.id === "string" ? cuts.get(p.id) : undefined
          if (cut && typeof p.text === "string") p.text = cutText(p.text, cut)
        }
      }
    } catch (error) {
      log("error", `loop-guard: internal error while cutting a looping part, context left whole: ${String(error)}`)
    }
  }

  return { watchStream, cutLoops, noteMessage, parts }
}

/** The stream's hooks: every event goes to its watchers first (synchronously, so deltas are seen in order). */
export function streamHooks(stream: ReturnType<typeof streamGuard>, toolEvents?: Hooks["event"]): Hooks {
  return {
    event: async (input) => {
      stream.watchStream(input?.event as { type?: unknown; properties?: unknown })
      await toolEvents?.(input)
    },
    "experimental.chat.messages.transform": async (_input, output) => stream.cutLoops(output),
    "chat.message": async (input, output) => stream.noteMessage(input?.sessionID, output?.parts),
  }
}

/**
 * Replays every line of the OpenClaw fixtures through the registered hook
 * handlers, plus a before_prompt_build on the first prompt of each new
 * session.
 *
 * Target: a live SessionHub when SESSIONHUB_URL and SESSIONHUB_TOKEN are set
 * (then every delivery must have been answered 200 with accepted/duplicate,
 * every continuity call 200 with a string preamble, and a JSON summary is
 * written to $SESSIONHUB_TEST_REPORT if set); otherwise the in-test stand-in
 * server, whose recorded bodies are compared with the fixtures.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ContinuityReport } from "../src/continuity.js";
import { resultFor, type DeliveryReport } from "../src/forwarder.js";
import { FORWARDED_HOOKS } from "../src/index.js";
import { clone, loadFixtures, setupPlugin, UUID_RE, type FixtureLine } from "./helpers/harness.js";
import { StandinServer } from "./helpers/standin-server.js";

const LIVE_URL = process.env.SESSIONHUB_URL;
const LIVE_TOKEN = process.env.SESSIONHUB_TOKEN;
const LIVE = !!(LIVE_URL && LIVE_TOKEN);

interface Fired {
  scenario: string;
  hook: string;
  sessionId: string | null;
  eventId: string;
  ts: number;
  line: FixtureLine;
}

interface PromptCall {
  scenario: string;
  sessionId: string;
  ctx: Record<string, unknown>;
  prompt: string;
  returned: unknown;
}

test(`fixture replay through the registered handlers (${LIVE ? `live SessionHub at ${LIVE_URL}` : "stand-in server"})`, async () => {
  const fixtures = loadFixtures();
  assert.ok(fixtures.length >= 5, "all fixture scenarios found");

  const server = LIVE ? null : new StandinServer("replay-token");
  if (server) {
    await server.start();
    server.defaultPreamble = "## Continuity\nEarlier you looked into the db-2 backup.";
  }
  const queueDir = mkdtempSync(join(tmpdir(), "sessionhub-replay-"));
  const timeoutMs = LIVE ? Number(process.env.SESSIONHUB_TIMEOUT_MS ?? 10000) : 1000;
  const h = setupPlugin(LIVE ? LIVE_URL! : server!.url, LIVE ? LIVE_TOKEN! : server!.token, { timeoutMs }, {}, queueDir);

  const deliveries: DeliveryReport[] = [];
  const continuity: ContinuityReport[] = [];
  h.runtime.onDelivery((r) => deliveries.push(r));
  h.runtime.onContinuity((r) => continuity.push(r));

  const fired: Fired[] = [];
  const prompts: PromptCall[] = [];
  const startedSessions = new Set<string>();

  try {
    for (const file of fixtures) {
      let pendingPrompt: { sessionId: string; ctx: Record<string, unknown> } | null = null;
      for (const line of file.lines) {
        const handler = h.api.handler(line.hook); // throws when the hook is not registered
        const before = h.eventIds.length;
        h.clock.now = line.ts;
        const result = handler(clone(line.event), clone(line.ctx));
        assert.equal(result, undefined, `${line.hook} is observation-only: returns nothing`);
        assert.equal(h.eventIds.length, before + 1, `${line.hook} produced exactly one forwarded record`);
        const sessionId = (line.ctx.sessionId ?? line.event.sessionId ?? null) as string | null;
        fired.push({ scenario: file.name, hook: line.hook, sessionId, eventId: h.eventIds[before], ts: line.ts, line });

        if (line.hook === "session_start" && typeof line.event.sessionId === "string") {
          const sid = line.event.sessionId;
          if (!startedSessions.has(sid)) {
            startedSessions.add(sid);
            pendingPrompt = { sessionId: sid, ctx: { ...line.ctx, workspaceDir: `/home/claw/.openclaw/workspace-${line.ctx.agentId}` } };
          }
        }
        if (line.hook === "message_received" && pendingPrompt) {
          // The gateway builds the prompt of the session's first turn.
          const prompt = String(line.event.content ?? "");
          const ctx = { ...pendingPrompt.ctx, trigger: "user", messageProvider: "discord" };
          const returned = await h.api.handler("before_prompt_build")({ prompt, messages: [] }, ctx);
          prompts.push({ scenario: file.name, sessionId: pendingPrompt.sessionId, ctx, prompt, returned });
          pendingPrompt = null;
        }
      }
      await h.runtime.idle();
    }
    await h.runtime.idle();

    const totalLines = fixtures.reduce((n, f) => n + f.lines.length, 0);
    assert.equal(fired.length, totalLines);
    assert.equal(new Set(fired.map((f) => f.eventId)).size, fired.length, "eventIds are unique");
    for (const f of fired) assert.match(f.eventId, UUID_RE);
    assert.ok(prompts.length >= fixtures.length, "a prompt hook call per new session");

    // Every fired record reached the target and was answered.
    const byEvent = new Map<string, { httpStatus: number; status?: string }[]>();
    for (const d of deliveries) {
      d.eventIds.forEach((id, index) => {
        const item = resultFor(id, index, d.eventIds.length, d.results);
        const list = byEvent.get(id) ?? [];
        list.push({ httpStatus: d.httpStatus, status: item?.status });
        byEvent.set(id, list);
      });
    }
    for (const f of fired) {
      const answers = byEvent.get(f.eventId) ?? [];
      const ok = answers.find((a) => a.httpStatus === 200);
      assert.ok(ok, `${f.scenario} ${f.hook} ${f.eventId}: answered 200 (got ${JSON.stringify(answers)})`);
      assert.ok(
        ok.status === "accepted" || ok.status === "duplicate",
        `${f.scenario} ${f.hook}: status accepted/duplicate, got ${ok.status}`,
      );
    }
    const queued = await h.runtime.queue.size();
    assert.equal(queued, 0, "nothing left in the retry queue");

    // Continuity: one request per new session, answered 200 with a string preamble.
    const asked = continuity.filter((c) => c.hook === "before_prompt_build" && !c.skipped && !c.waiting);
    assert.equal(asked.length, prompts.length);
    for (const c of asked) {
      assert.equal(c.httpStatus, 200, `continuity for ${c.sessionId}: HTTP 200 (${c.error ?? ""})`);
      assert.equal(typeof c.preamble, "string", `continuity for ${c.sessionId}: preamble is a string`);
      const call = prompts.find((p) => p.sessionId === c.sessionId);
      if (c.preamble && c.preamble.trim()) {
        assert.deepEqual(call?.returned, { prependContext: c.preamble });
      } else {
        assert.equal(call?.returned, undefined);
      }
    }

    if (server) {
      // Stand-in: the server saw each fixture line once, in order, unchanged.
      assert.deepEqual(server.acceptedIds(), fired.map((f) => f.eventId));
      server.accepted.forEach((a, i) => {
        const f = fired[i];
        assert.deepEqual(Object.keys(a.record).sort(), ["ctx", "event", "eventId", "gateway", "hook", "ts"]);
        assert.equal(a.record.hook, f.hook);
        assert.equal(a.record.ts, f.ts);
        assert.deepEqual(a.record.ctx, f.line.ctx);
        // agent_end's 4 messages are within recentMessages (6): unchanged too.
        assert.deepEqual(a.record.event, f.line.event);
      });
      for (const req of server.requests) assert.equal(req.authorization, `Bearer ${server.token}`);
      const cont = server.continuityRequests();
      assert.equal(cont.length, prompts.length);
      cont.forEach((req, i) => {
        const p = prompts[i];
        assert.deepEqual(req.body, {
          source: "openclaw",
          agent_id: p.ctx.agentId,
          session_id: p.sessionId,
          session_key: p.ctx.sessionKey,
          prompt: p.prompt,
          gateway: h.runtime.gatewayId,
        });
        assert.deepEqual(p.returned, { prependContext: server.defaultPreamble });
      });
      // Every kind of forwarded fixture hook was exercised.
      const seenHooks = new Set(fired.map((f) => f.hook));
      for (const hook of ["session_start", "session_end", "before_compaction", "after_compaction", "message_received", "before_tool_call", "after_tool_call", "agent_end"]) {
        assert.ok(seenHooks.has(hook) && (FORWARDED_HOOKS as readonly string[]).includes(hook), hook);
      }
    }
  } finally {
    const reportPath = process.env.SESSIONHUB_TEST_REPORT;
    if (reportPath) {
      const summary = {
        mode: LIVE ? "live" : "stand-in",
        baseUrl: LIVE ? LIVE_URL : server?.url,
        sent: fired.map((f) => ({
          scenario: f.scenario,
          hook: f.hook,
          sessionId: f.sessionId,
          eventId: f.eventId,
          ts: f.ts,
          answers: deliveries
            .filter((d) => d.eventIds.includes(f.eventId))
            .map((d) => {
              const item = resultFor(f.eventId, d.eventIds.indexOf(f.eventId), d.eventIds.length, d.results);
              return {
                httpStatus: d.httpStatus,
                fromQueue: d.fromQueue,
                status: item?.status ?? null,
                result: item ?? null,
                error: d.error ?? null,
              };
            }),
        })),
        continuity: continuity.map((c) => ({
          hook: c.hook,
          sessionId: c.sessionId,
          sessionKey: c.sessionKey,
          agentId: c.agentId,
          skipped: c.skipped ?? null,
          httpStatus: c.httpStatus ?? null,
          preamble: c.preamble ?? null,
          returned: c.returned ?? null,
          error: c.error ?? null,
        })),
        requests: deliveries.length,
        queuedLeft: await h.runtime.queue.size().catch(() => -1),
        warnings: h.api.logs.warn,
        errors: h.api.logs.error,
      };
      writeFileSync(reportPath, JSON.stringify(summary, null, 2));
    }
    h.runtime.stop();
    await server?.stop();
    rmSync(queueDir, { recursive: true, force: true });
  }
});

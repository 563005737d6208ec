/**
 * The plugin's packaging and registration: manifest, package.json, the entry
 * object, and which hooks `register(api)` subscribes to.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import entry, { COMMAND_EVENTS, COMMAND_HOOK_NAME, FORWARDED_HOOKS, getSessionHubRuntime } from "../src/index.js";
import { makeFakeApi, PACKAGE_ROOT, setupPlugin } from "./helpers/harness.js";

const manifest = JSON.parse(readFileSync(join(PACKAGE_ROOT, "openclaw.plugin.json"), "utf8"));
const pkg = JSON.parse(readFileSync(join(PACKAGE_ROOT, "package.json"), "utf8"));

test("manifest: id, name, description and a config schema with the documented fields", () => {
  assert.equal(manifest.id, "sessionhub");
  assert.equal(typeof manifest.name, "string");
  assert.ok(manifest.description.length > 10);
  const schema = manifest.configSchema;
  assert.equal(schema.type, "object");
  // The token is not required: without one the events wait in the queue (issue 14).
  assert.deepEqual([...schema.required].sort(), ["baseUrl"]);
  assert.equal(schema.properties.baseUrl.type, "string");
  assert.equal(schema.properties.token.type, "string");
  assert.equal(schema.properties.timeoutMs.default, 2000);
  assert.equal(schema.properties.queueDir.type, "string");
  assert.equal(schema.properties.recentMessages.default, 40);
  assert.equal(schema.properties.gatewayId.type, "string");
  assert.equal(schema.properties.injectPreamble.type, "boolean");
  assert.equal(schema.properties.injectPreamble.default, true);
  // OpenClaw's validator warns on "format"; keep it out.
  assert.ok(!JSON.stringify(schema).includes('"format"'));
  assert.equal(manifest.uiHints.token.sensitive, true);
});

test("package.json: ESM, openclaw.extensions points at the built entry, no runtime dependencies", () => {
  assert.equal(pkg.name, "@sessionhub/openclaw-plugin");
  assert.equal(pkg.type, "module");
  assert.deepEqual(pkg.openclaw.extensions, ["./dist/src/index.js"]);
  assert.ok(existsSync(join(PACKAGE_ROOT, pkg.openclaw.extensions[0])), "built entry exists");
  assert.equal(pkg.dependencies, undefined, "no runtime dependencies");
  assert.deepEqual(Object.keys(pkg.devDependencies).sort(), ["@types/node", "typescript"]);
  assert.match(pkg.scripts.build, /tsc/);
  assert.match(pkg.scripts.test, /node --test/);
});

test("entry: a definePluginEntry object whose id matches the manifest", () => {
  assert.equal(entry.id, manifest.id);
  assert.equal(entry.name, "SessionHub");
  assert.equal(typeof entry.description, "string");
  assert.equal(typeof entry.register, "function");
  assert.deepEqual(entry.configSchema.jsonSchema, manifest.configSchema);
});

test("register: subscribes every forwarded hook, the prompt hooks, gateway_stop and the command events", () => {
  const h = setupPlugin("http://127.0.0.1:9", "t");
  try {
    const hooks = h.api.hooks();
    for (const hook of [
      "session_start",
      "session_end",
      "before_compaction",
      "after_compaction",
      "message_received",
      "before_tool_call",
      "after_tool_call",
      "agent_end",
      "before_agent_finalize",
      "before_reset",
      "before_prompt_build",
      "gateway_stop",
    ]) {
      assert.ok(hooks.includes(hook), `${hook} registered`);
    }
    // Gone from OpenClaw 2026.9: registering it earns a warning on every load.
    assert.ok(!hooks.includes("before_agent_start"));
    assert.equal(new Set(hooks).size, hooks.length, "no hook registered twice");
    assert.deepEqual([...FORWARDED_HOOKS].every((x) => hooks.includes(x)), true);
    // Prompt hooks carry a host-side time budget a little above timeoutMs.
    const prompt = h.api.registrations.find((r) => r.hook === "before_prompt_build");
    assert.deepEqual(prompt?.opts, { timeoutMs: 1000 });
    assert.equal(h.api.internal.length, 1);
    assert.deepEqual(h.api.internal[0].events, [...COMMAND_EVENTS]);
    assert.equal(h.api.internal[0].opts?.name, COMMAND_HOOK_NAME);
    assert.deepEqual(h.runtime.registeredHooks, hooks);
  } finally {
    h.cleanup();
  }
});

test("register: config defaults are applied", () => {
  const api = makeFakeApi({ baseUrl: "https://hub.example.com/", token: "abc" });
  entry.register(api);
  const runtime = getSessionHubRuntime(api);
  try {
    assert.ok(runtime);
    assert.equal(runtime.config.baseUrl, "https://hub.example.com");
    assert.equal(runtime.config.timeoutMs, 2000);
    assert.equal(runtime.config.recentMessages, 40);
    assert.equal(runtime.config.injectPreamble, true);
    assert.match(runtime.config.queueDir, /\.openclaw[/\\]sessionhub-queue$/);
    assert.match(runtime.queue.file, /sessionhub-queue[/\\]queue\.jsonl$/);
  } finally {
    runtime?.stop();
  }
});

test("register: injectPreamble=false still forwards the prompt, never injects", () => {
  const h = setupPlugin("http://127.0.0.1:9", "t", { injectPreamble: false });
  try {
    assert.ok(h.api.hooks().includes("before_prompt_build"));
    assert.ok(!h.api.hooks().includes("before_agent_start"));
    assert.ok(h.api.hooks().includes("agent_end"));
  } finally {
    h.cleanup();
  }
});

test("register: extraHooks adds forwarded hooks but never prompt/decision hooks", () => {
  const h = setupPlugin("http://127.0.0.1:9", "t", { extraHooks: ["session_suspend", "session_resume", "before_prompt_build"] });
  try {
    const hooks = h.api.hooks();
    assert.ok(hooks.includes("session_suspend"));
    assert.ok(hooks.includes("session_resume"));
    assert.equal(hooks.filter((x) => x === "before_prompt_build").length, 1);
    assert.ok(h.api.logs.warn.some((m) => m.includes("before_prompt_build cannot be forwarded")));
  } finally {
    h.cleanup();
  }
});

test("register: a missing token keeps the plugin on (events queued, said loudly)", () => {
  const dir = mkdtempSync(join(tmpdir(), "sessionhub-notoken-"));
  const api = makeFakeApi({ baseUrl: "http://127.0.0.1:9", queueDir: dir });
  try {
    entry.register(api);
    const runtime = getSessionHubRuntime(api);
    assert.ok(runtime);
    assert.ok(api.logs.error.some((m) => m.includes("no SessionHub token")), JSON.stringify(api.logs));
    runtime.stop();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("register: a missing or bad baseUrl disables the plugin with a warning, without throwing", () => {
  for (const cfg of [{ token: "t" }, { baseUrl: "ftp://x", token: "t" }, {}]) {
    const api = makeFakeApi(cfg);
    assert.doesNotThrow(() => entry.register(api));
    assert.equal(api.registrations.length, 0);
    assert.equal(getSessionHubRuntime(api), undefined);
    assert.ok(api.logs.warn.some((m) => m.includes("disabled")), JSON.stringify(api.logs));
  }
});

test("register: a gateway whose api.on throws, or that has no registerHook, does not break registration", () => {
  const api = makeFakeApi({ baseUrl: "http://127.0.0.1:9", token: "t", queueDir: "/tmp/sessionhub-test-unused" });
  let calls = 0;
  api.on = () => {
    calls += 1;
    throw new Error("unknown typed hook");
  };
  (api as { registerHook?: unknown }).registerHook = undefined;
  assert.doesNotThrow(() => entry.register(api));
  assert.ok(calls > 5);
  const runtime = getSessionHubRuntime(api);
  assert.ok(runtime);
  assert.equal(runtime.registeredHooks.length, 0);
  runtime.stop();
});

test("turnUsage: a turn's assistant usage summed, with the last model; none without usage", async () => {
  const { turnUsage } = await import("../src/index.js");
  const turn = [
    { role: "user", content: "hi" },
    { role: "assistant", model: "claude-sonnet-4-5", usage: { input: 3260, output: 122, cacheRead: 100 } },
    { role: "toolResult", content: "ok" },
    { role: "assistant", model: "claude-sonnet-4-5", usage: { input: 6652, output: 283, cacheWrite: 7, totalTokens: 1 } },
  ];
  assert.deepEqual(turnUsage(turn), {
    input: 9912,
    output: 405,
    cacheRead: 100,
    cacheWrite: 7,
    model: "claude-sonnet-4-5",
  });
  assert.equal(turnUsage([{ role: "user", content: "hi" }, { role: "assistant", content: [] }]), undefined);
});

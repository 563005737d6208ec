/**
 * SessionHub's memory tools as the plugin registers them: one agent tool per tool of
 * the server's tools/list, each call one MCP tools/call to /api/v1/mcp that names the
 * asking session, and every failure a result the model can read (never a throw).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";

import { agentToolNames, memoryTool, toolDefinitions, type AgentTool } from "../src/memory-tools.js";
import { PACKAGE_ROOT, setupPlugin } from "./helpers/harness.js";
import { StandinServer } from "./helpers/standin-server.js";

function toolFrom(factory: unknown, ctx: Record<string, unknown>): AgentTool {
  assert.equal(typeof factory, "function");
  return (factory as (ctx: unknown) => AgentTool)(ctx);
}

test("the plugin registers one tool per server tool, declared in the manifest", async () => {
  const server = new StandinServer();
  await server.start();
  const h = setupPlugin(server.url, server.token);
  try {
    const names = h.api.tools.map((t) => t.opts?.name);
    assert.deepEqual(names, agentToolNames());
    assert.deepEqual(names, [
      "sessionhub_search_memory",
      "sessionhub_get_session",
      "sessionhub_get_timeline",
      "sessionhub_recent_sessions",
      "sessionhub_list_pins",
    ]);
    const manifest = JSON.parse(readFileSync(join(PACKAGE_ROOT, "openclaw.plugin.json"), "utf8"));
    assert.deepEqual(manifest.contracts.tools, names);
    assert.deepEqual(h.runtime.registeredTools, names);
    const search = toolFrom(h.api.tools[0].factory, { sessionId: "s-1" });
    assert.equal(search.name, "sessionhub_search_memory");
    // Descriptions name the other tools as the agent sees them.
    assert.match(search.description, /sessionhub_get_session/);
    assert.doesNotMatch(search.description, /(?<!sessionhub_)\bget_session\b/);
    assert.deepEqual(search.parameters, toolDefinitions()[0].inputSchema);
  } finally {
    h.cleanup();
    await server.stop();
  }
});

test("memoryTools: false registers none", async () => {
  const server = new StandinServer();
  await server.start();
  const h = setupPlugin(server.url, server.token, { memoryTools: false });
  try {
    assert.equal(h.api.tools.length, 0);
  } finally {
    h.cleanup();
    await server.stop();
  }
});

test("a call is one MCP tools/call naming the asking session", async () => {
  const server = new StandinServer();
  await server.start();
  const h = setupPlugin(server.url, server.token);
  try {
    const tool = toolFrom(h.api.tools[0].factory, { sessionId: "sess-42", agentId: "main" });
    const result = await tool.execute("call-7", { query: "webhook retries" });
    assert.deepEqual(result.details, { tool: "search_memory" });
    assert.equal(result.content[0].text, JSON.stringify({ tool: "search_memory" }));
    const [request] = server.mcpRequests();
    assert.equal(request.authorization, `Bearer ${server.token}`);
    assert.equal(request.headers["x-sessionhub-source"], "openclaw");
    assert.equal(request.headers["x-sessionhub-session"], "sess-42");
    assert.equal(request.headers["mcp-protocol-version"], "2026-07-28");
    assert.equal(request.headers["mcp-method"], "tools/call");
    assert.equal(request.headers["mcp-name"], "search_memory");
    const body = request.body as { id: string; method: string; params: Record<string, unknown> };
    assert.equal(body.method, "tools/call");
    assert.equal(body.id, "call-7");
    assert.equal(body.params.name, "search_memory");
    assert.deepEqual(body.params.arguments, { query: "webhook retries" });
    const meta = body.params._meta as Record<string, unknown>;
    assert.equal(meta["io.modelcontextprotocol/protocolVersion"], "2026-07-28");
    assert.deepEqual(meta["io.modelcontextprotocol/clientCapabilities"], {});
  } finally {
    h.cleanup();
    await server.stop();
  }
});

test("refusals, tool errors and outages are results that say so", async () => {
  const server = new StandinServer();
  await server.start();
  const config = { baseUrl: server.url, token: server.token, timeoutMs: 300 };
  const [definition] = toolDefinitions();
  try {
    server.mcpAnswer = () => ({
      status: 403,
      body: { jsonrpc: "2.0", id: null, error: { code: -32003, message: "This token lacks the read scope" } },
    });
    const refused = await memoryTool(definition, config, {}).execute("c1", { query: "x" });
    assert.match(refused.content[0].text, /refused the call: This token lacks the read scope/);

    server.mcpAnswer = (body) => ({
      status: 200,
      body: {
        jsonrpc: "2.0",
        id: (body as { id: string }).id,
        result: { content: [{ type: "text", text: "search_memory: query is required" }], isError: true },
      },
    });
    const invalid = await memoryTool(definition, config, {}).execute("c2", {});
    assert.equal(invalid.content[0].text, "search_memory: query is required");
    assert.deepEqual(invalid.details, { error: "search_memory: query is required" });

    const noToken = await memoryTool(definition, { ...config, token: "" }, {}).execute("c3", { query: "x" });
    assert.match(noToken.content[0].text, /no token/);

    server.mcpFailure = { kind: "hang" };
    const slow = await memoryTool(definition, config, {}, undefined).execute("c4", { query: "x" });
    assert.match(slow.content[0].text, /not reachable right now \(no answer within/);
  } finally {
    await server.stop();
  }
});

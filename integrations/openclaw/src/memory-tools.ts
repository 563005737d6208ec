/**
 * SessionHub's memory tools for OpenClaw's agents: search the team's memory, read one
 * session's memory or timeline, a project's recent sessions and open tasks, an
 * agent's pins.
 *
 * They are the tools of SessionHub's MCP endpoint (`/api/v1/mcp`), registered as
 * agent tools named `sessionhub_<tool>`: each call is one stateless MCP `tools/call`
 * (protocol 2026-07-28, as the MCP SDKs speak it) with the plugin's token, and names
 * the calling session (`X-SessionHub-Source: openclaw`, `X-SessionHub-Session`), so
 * SessionHub records the call against it and answers "my project" and "my pins" for
 * it. The definitions come from `memory-tools.json` (the server's own `tools/list`;
 * `tests/integrations/test_openclaw_plugin_tools.py` keeps the two the same).
 */

import { readFileSync } from "node:fs";

import { describe } from "./client.js";
import type { SessionHubConfig } from "./config.js";

export const MCP_PATH = "/api/v1/mcp";
export const MCP_VERSION = "2026-07-28";
export const TOOL_PREFIX = "sessionhub_";

/** One tool as the server's `tools/list` gives it. */
export interface McpToolDefinition {
  name: string;
  title: string;
  description: string;
  inputSchema: Record<string, unknown>;
}

/** A tool result as OpenClaw's agent tools return it. */
export interface AgentToolResult {
  content: { type: "text"; text: string }[];
  details: unknown;
}

/** The part of an OpenClaw agent tool this plugin fills in. */
export interface AgentTool {
  name: string;
  label: string;
  description: string;
  parameters: Record<string, unknown>;
  execute: (toolCallId: string, params: unknown, signal?: AbortSignal) => Promise<AgentToolResult>;
}

/** What OpenClaw tells a tool factory about the run it is made for. */
export interface ToolContext {
  sessionId?: string;
  agentId?: string;
  sessionKey?: string;
}

let cached: McpToolDefinition[] | undefined;

/** The server's tool definitions, shipped with the plugin. */
export function toolDefinitions(): McpToolDefinition[] {
  if (!cached) {
    const url = new URL("../../memory-tools.json", import.meta.url);
    cached = JSON.parse(readFileSync(url, "utf8")) as McpToolDefinition[];
  }
  return cached;
}

/** The tool names as OpenClaw's agents see them. */
export function agentToolNames(): string[] {
  return toolDefinitions().map((d) => TOOL_PREFIX + d.name);
}

/** A description that names the other tools as the agent sees them. */
function agentDescription(text: string, names: string[]): string {
  const pattern = new RegExp(`\\b(${names.join("|")})\\b`, "g");
  return text.replace(pattern, (name) => TOOL_PREFIX + name);
}

/** One JSON-RPC request body in the per-request envelope. */
function callBody(id: string, name: string, args: unknown): Record<string, unknown> {
  return {
    jsonrpc: "2.0",
    id,
    method: "tools/call",
    params: {
      name,
      arguments: args && typeof args === "object" && !Array.isArray(args) ? args : {},
      _meta: {
        "io.modelcontextprotocol/protocolVersion": MCP_VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": { name: "sessionhub-openclaw-plugin", version: "0.1.0" },
      },
    },
  };
}

function failure(text: string): AgentToolResult {
  return { content: [{ type: "text", text }], details: { error: text } };
}

/**
 * Call one tool on SessionHub's MCP endpoint; never throws: a refusal, an outage or a
 * timeout is a result that says what happened, as the model should read it.
 */
export async function callMemoryTool(
  config: Pick<SessionHubConfig, "baseUrl" | "token" | "timeoutMs">,
  name: string,
  args: unknown,
  context: ToolContext & { callId: string },
  options: { signal?: AbortSignal; fetchImpl?: typeof fetch; timeoutMs?: number } = {},
): Promise<AgentToolResult> {
  if (!config.token) return failure("SessionHub memory is not available: the plugin has no token.");
  const controller = new AbortController();
  const budget = Math.max(1000, options.timeoutMs ?? Math.max(config.timeoutMs, 10_000));
  const timer = setTimeout(() => controller.abort(), budget);
  const onAbort = (): void => controller.abort();
  options.signal?.addEventListener("abort", onAbort, { once: true });
  const headers: Record<string, string> = {
    "Content-Type": "application/json",
    Accept: "application/json, text/event-stream",
    Authorization: `Bearer ${config.token}`,
    "MCP-Protocol-Version": MCP_VERSION,
    "Mcp-Method": "tools/call",
    "Mcp-Name": name,
    "User-Agent": "sessionhub-openclaw-plugin",
    "X-SessionHub-Source": "openclaw",
  };
  if (context.sessionId) headers["X-SessionHub-Session"] = context.sessionId;
  try {
    const response = await (options.fetchImpl ?? fetch)(config.baseUrl + MCP_PATH, {
      method: "POST",
      headers,
      body: JSON.stringify(callBody(context.callId || "call", name, args)),
      signal: controller.signal,
    });
    const text = await response.text();
    let body: Record<string, unknown> | undefined;
    try {
      body = JSON.parse(text) as Record<string, unknown>;
    } catch {
      body = undefined;
    }
    const error = body?.error as { message?: unknown } | undefined;
    if (!response.ok || error) {
      const message = typeof error?.message === "string" ? error.message : `HTTP ${response.status}`;
      return failure(`SessionHub memory refused the call: ${message}`);
    }
    const result = body?.result as
      | { content?: { type?: string; text?: string }[]; isError?: boolean; structuredContent?: unknown }
      | undefined;
    const answer = (result?.content ?? [])
      .filter((block) => block.type === "text" && typeof block.text === "string")
      .map((block) => block.text as string)
      .join("\n");
    if (result?.isError) return failure(answer || "SessionHub memory could not answer.");
    return { content: [{ type: "text", text: answer }], details: result?.structuredContent ?? { text: answer } };
  } catch (err) {
    const why = controller.signal.aborted ? `no answer within ${budget} ms` : describe(err);
    return failure(`SessionHub memory is not reachable right now (${why}).`);
  } finally {
    clearTimeout(timer);
    options.signal?.removeEventListener("abort", onAbort);
  }
}

/** The agent tool for one definition, bound to the run OpenClaw makes it for. */
export function memoryTool(
  definition: McpToolDefinition,
  config: Pick<SessionHubConfig, "baseUrl" | "token" | "timeoutMs">,
  context: ToolContext,
  fetchImpl?: typeof fetch,
): AgentTool {
  const names = toolDefinitions().map((d) => d.name);
  return {
    name: TOOL_PREFIX + definition.name,
    label: definition.title,
    description: agentDescription(definition.description, names),
    parameters: definition.inputSchema,
    execute: (toolCallId, params, signal) =>
      callMemoryTool(config, definition.name, params, { ...context, callId: toolCallId }, {
        signal,
        fetchImpl,
      }),
  };
}

/**
 * Child process for the exit test: registers the plugin against a server that
 * never answers, fires three hooks and exits while their delivery is still in
 * flight. Prints the eventIds it created as a JSON array on the last line.
 */
import { createPluginEntry } from "../../src/index.js";
import { makeFakeApi } from "./harness.js";
import { randomUUID } from "node:crypto";

const [baseUrl, token, queueDir] = process.argv.slice(2);
const ids: string[] = [];
const api = makeFakeApi({ baseUrl, token, queueDir, timeoutMs: 5000 });
createPluginEntry({
  newEventId: () => {
    const id = randomUUID();
    ids.push(id);
    return id;
  },
}).register(api);

api.handler("session_start")({ sessionId: "exit-1" }, { sessionId: "exit-1", agentId: "main" });
api.handler("message_received")({ from: "u", content: "hi" }, { channelId: "discord" });
api.handler("session_end")({ sessionId: "exit-1", messageCount: 1, reason: "shutdown" }, { sessionId: "exit-1" });

// Let the first request leave, then exit without waiting for it.
setTimeout(() => {
  process.stdout.write(JSON.stringify(ids) + "\n");
  process.exit(0);
}, 150);

// Drives an A2A agent with the official JavaScript client: @a2a-js/sdk 1.3.0 (A2A 1.0, JSON-RPC or HTTP+JSON)
// or 0.3.14 (the "a2a-js-0.3" alias, A2A 0.3 JSON-RPC), the way an application does.
// Input (argv[2]): {"url": base URL, "sdk": "1.3" | "0.3", "binding": "JSONRPC" | "HTTP+JSON", "steps": [...]}.
// A step: {"op": "send" | "stream" | "get" | "list" | "cancel" | "subscribe" | "rest" | "post", "as"?: name,
//   "request": the request in the SDK's JSON form (1.3: ProtoJSON, as on the wire; 0.3: its params),
//   "take"?: n (a stream: read n events, keep the rest for a later "rest" step), "of"?: name ("rest"),
//   "path"?: (a "post" to the agent's own test route)}. Strings "{name}" in a request are replaced by the
//   task id step "name" saw.
// Output (stdout): one JSON line: per step, what it got (events, result, or the error), in the SDK's JSON form.
import {
  CancelTaskRequest,
  GetTaskRequest,
  ListTasksRequest,
  Message,
  SendMessageRequest,
  StreamResponse,
  SubscribeToTaskRequest,
  Task,
} from "@a2a-js/sdk";
import { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory, RestTransportFactory } from "@a2a-js/sdk/client";
import { A2AClient } from "a2a-js-0.3/client";

const scenario = JSON.parse(process.argv[2]);
const legacy = scenario.sdk === "0.3";
// "token": sent as a bearer token on every request (ListTasks lists nothing to an anonymous caller)
const fetchImpl = (input, init = {}) => {
  const headers = new Headers(init.headers || {});
  if (scenario.token) headers.set("authorization", `Bearer ${scenario.token}`);
  return fetch(input, { ...init, headers });
};
const client = legacy
  ? await A2AClient.fromCardUrl(`${scenario.url}/.well-known/agent.json`, { fetchImpl })
  : await new ClientFactory(
      ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
        transports: [new JsonRpcTransportFactory({ fetchImpl }), new RestTransportFactory({ fetchImpl })],
        preferredTransports: [scenario.binding || "JSONRPC"],
      }),
    ).createFromUrl(scenario.url);

const ids = {};
const open = {};

function fill(value) {
  if (typeof value === "string") return value.replace(/\{(\w+)\}/g, (_, name) => ids[name] ?? `{${name}}`);
  if (Array.isArray(value)) return value.map(fill);
  if (value && typeof value === "object") return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, fill(v)]));
  return value;
}

// 1.3 events and results as ProtoJSON (the wire's names); 0.3 ones are plain JSON already.
const event = (e) => (legacy ? e : StreamResponse.toJSON(e));
const result = (r) => (legacy ? r : "messageId" in r && !("status" in r) ? { message: Message.toJSON(r) } : { task: Task.toJSON(r) });
function unwrap(response) {  // a 0.3 JSON-RPC response: its result, or its error thrown
  if (!legacy) return response;
  if (response.error) throw Object.assign(new Error(response.error.message), { code: response.error.code });
  return response.result;
}
function taskIdOf(e) {
  if (legacy) return e.kind === "task" ? e.id : e.taskId;
  const p = e.payload;
  if (!p) return undefined;
  return p.$case === "task" ? p.value.id : p.value.taskId;
}

async function take(name, iterator, count) {
  const events = [];
  while (count === undefined || events.length < count) {
    const next = await iterator.next();
    if (next.done) {
      delete open[name];
      return { events, ended: true };
    }
    events.push(event(next.value));
    if (ids[name] === undefined && taskIdOf(next.value)) ids[name] = taskIdOf(next.value);
  }
  return { events, ended: false };
}

const steps = [];
for (const step of scenario.steps) {
  const name = step.as || `step${steps.length}`;
  const request = fill(step.request || {});
  const out = { op: step.op, as: name };
  try {
    if (step.op === "send") {
      const got = legacy ? unwrap(await client.sendMessage(request)) : await client.sendMessage(SendMessageRequest.fromJSON(request));
      out.result = result(got);
      ids[name] = legacy ? (got.kind === "task" ? got.id : undefined) : out.result.task?.id;
    } else if (step.op === "stream" || step.op === "subscribe") {
      const iterator = step.op === "stream"
        ? (legacy ? client.sendMessageStream(request) : client.sendMessageStream(SendMessageRequest.fromJSON(request)))
        : (legacy ? client.resubscribeTask(request) : client.resubscribeTask(SubscribeToTaskRequest.fromJSON(request)));
      open[name] = iterator;
      Object.assign(out, await take(name, iterator, step.take));
    } else if (step.op === "rest") {
      Object.assign(out, await take(step.of, open[step.of]));
    } else if (step.op === "get") {
      const got = legacy ? unwrap(await client.getTask(request)) : await client.getTask(GetTaskRequest.fromJSON(request));
      out.result = legacy ? got : Task.toJSON(got);
    } else if (step.op === "cancel") {
      const got = legacy ? unwrap(await client.cancelTask(request)) : await client.cancelTask(CancelTaskRequest.fromJSON(request));
      out.result = legacy ? got : Task.toJSON(got);
    } else if (step.op === "list") {
      const got = await client.listTasks(ListTasksRequest.fromJSON(request));
      out.result = { tasks: got.tasks.map((t) => Task.toJSON(t)), totalSize: got.totalSize };
    } else if (step.op === "post") {
      const response = await fetch(`${scenario.url}${step.path}`, { method: "POST" });
      out.result = { status: response.status };
    } else {
      throw new Error(`unknown op ${step.op}`);
    }
  } catch (error) {
    out.error = { message: String(error?.message || error), code: error?.code ?? null, name: error?.constructor?.name ?? null };
  }
  steps.push(out);
}
for (const iterator of Object.values(open)) await iterator.return?.();
process.stdout.write(JSON.stringify({ steps }) + "\n");

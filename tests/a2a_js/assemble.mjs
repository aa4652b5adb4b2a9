// Streams one message to an A2A agent with @a2a-js/sdk 1.3.0's client and puts the task together with the SDK's
// own ResultManager (what an @a2a-js/sdk server or proxy keeps of the events it relays: `append` adds the parts,
// a later chunk's name and description win, metadata merges), then reads the agent's own task with GetTask.
// Input (argv[2]): {"url": base URL, "binding": "JSONRPC" | "HTTP+JSON", "request": SendMessageRequest (ProtoJSON)}.
// Output (stdout): one JSON line {"events": [...], "assembled": Task, "get": Task}, all in ProtoJSON.
import { GetTaskRequest, SendMessageRequest, StreamResponse, Task } from "@a2a-js/sdk";
import { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory, RestTransportFactory } from "@a2a-js/sdk/client";
import { InMemoryTaskStore, ResultManager, ServerCallContext } from "@a2a-js/sdk/server";

const scenario = JSON.parse(process.argv[2]);
const client = await new ClientFactory(
  ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new JsonRpcTransportFactory(), new RestTransportFactory()],
    preferredTransports: [scenario.binding || "JSONRPC"],
  }),
).createFromUrl(scenario.url);

const manager = new ResultManager(new InMemoryTaskStore(), new ServerCallContext());
const events = [];
let taskId;
for await (const item of client.sendMessageStream(SendMessageRequest.fromJSON(scenario.request))) {
  events.push(StreamResponse.toJSON(item));
  const { $case, value } = item.payload;
  if ($case === "task") taskId = value.id;
  await manager.processEvent({ kind: $case, data: value });
}
const assembled = manager.getCurrentTask();
const got = await client.getTask(GetTaskRequest.fromJSON({ id: taskId }));
process.stdout.write(JSON.stringify({ events, assembled: Task.toJSON(assembled), get: Task.toJSON(got) }) + "\n");

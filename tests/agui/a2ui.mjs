// An AG-UI run whose skill shows A2UI surfaces, as an A2UI-capable front end receives it: the official
// @ag-ui/client HttpAgent runs it (and verifies the event stream), then each `a2ui-surface` activity's
// operations go through the official A2UI v0.9 MessageProcessor (@a2ui/web_core, the model behind
// @a2ui/lit), which checks every message against the basic catalog and builds the surface.
// argv[2]: {"url", "threadId", "runId", "say"}. Prints one JSON line: the events, the activity messages,
// and per snapshot the surfaces the processor built (components by id, data model) and what it complained of.
import { HttpAgent } from "@ag-ui/client";
import { MessageProcessor } from "@a2ui/web_core/v0_9";
import { basicCatalog } from "@a2ui/web_core/v0_9/basic_catalog";

const scenario = JSON.parse(process.argv[2]);
const complaints = [];
const original = { error: console.error, warn: console.warn };
console.error = (...args) => complaints.push(args.map((a) => (typeof a === "string" ? a : JSON.stringify(a))).join(" "));
console.warn = console.error;

const agent = new HttpAgent({ url: scenario.url, threadId: scenario.threadId });
agent.addMessage({ id: `u-${scenario.runId}`, role: "user", content: scenario.say });
const events = [];
let rejected = null;
try {
  await agent.runAgent({ runId: scenario.runId }, { onEvent: ({ event }) => { events.push(event); } });
} catch (error) {
  rejected = String(error && error.message || error);
}

function render(operations) {
  const processor = new MessageProcessor([basicCatalog]);
  const surfaces = {};
  processor.onSurfaceCreated((surface) => { surfaces[surface.id] = surface; });
  processor.onSurfaceDeleted((id) => { surfaces[id] = null; });
  const before = complaints.length;
  let thrown = null;
  try {
    processor.processMessages(operations);
  } catch (error) {
    thrown = String(error && error.message || error);
  }
  const built = {};
  for (const [id, surface] of Object.entries(surfaces)) {
    if (surface === null) { built[id] = null; continue; }
    const components = {};
    for (const [cid, model] of surface.componentsModel.components) {
      components[cid] = { type: model.type, properties: model.properties };
    }
    built[id] = { catalog: surface.catalog.id, components, data: surface.dataModel.get("/") };
  }
  return { built, thrown, complaints: complaints.slice(before) };
}

const snapshots = events
  .filter((e) => e.type === "ACTIVITY_SNAPSHOT" && e.activityType === "a2ui-surface")
  .map((e) => ({ messageId: e.messageId, ...render(structuredClone(e.content.a2ui_operations)) }));  // it applies them in place
console.error = original.error;
console.warn = original.warn;
const activities = agent.messages.filter((m) => m.role === "activity");
process.stdout.write(JSON.stringify({ rejected, events, activities, snapshots, complaints }) + "\n");

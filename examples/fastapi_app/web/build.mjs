// The example page's one build step: bundle @ag-ui/client into static/vendor/ag-ui-client.js, and the official
// A2UI web renderer (@a2ui/lit's v0.9 <a2ui-surface> with its basic catalog, and @a2ui/web_core's
// MessageProcessor) into static/vendor/a2ui.js. The output is committed, so serving the example needs no Node;
// rerun (`npm ci && npm run build` here) after changing a version.
import { build } from "esbuild";

const common = {
  bundle: true,
  format: "esm",
  platform: "browser",
  target: "es2020",
  minify: true,
  legalComments: "eof",
};

await build({
  ...common,
  stdin: { contents: 'export { HttpAgent } from "@ag-ui/client";', resolveDir: process.cwd(), loader: "js" },
  outfile: "../static/vendor/ag-ui-client.js",
});
console.log("wrote static/vendor/ag-ui-client.js");

await build({
  ...common,
  target: "es2022",  // lit's decorators and class fields
  stdin: {
    contents: [
      'export { MessageProcessor } from "@a2ui/web_core/v0_9";',
      'export { A2uiSurface, Context, basicCatalog } from "@a2ui/lit/v0_9";',  // importing it defines <a2ui-surface>
      'export { ContextProvider } from "@lit/context";',  // to give the renderer a Text renderer
    ].join("\n"),
    resolveDir: process.cwd(),
    loader: "js",
  },
  outfile: "../static/vendor/a2ui.js",
});
console.log("wrote static/vendor/a2ui.js");

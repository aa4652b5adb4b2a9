// The example page's one build step: bundle @ag-ui/client into static/vendor/ag-ui-client.js.
// The output is committed, so serving the example needs no Node; rerun after changing the version.
import { build } from "esbuild";

await build({
  stdin: { contents: 'export { HttpAgent } from "@ag-ui/client";', resolveDir: process.cwd(), loader: "js" },
  bundle: true,
  format: "esm",
  platform: "browser",
  target: "es2020",
  minify: true,
  legalComments: "eof",
  outfile: "../static/vendor/ag-ui-client.js",
});
console.log("wrote static/vendor/ag-ui-client.js");

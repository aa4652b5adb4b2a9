// The example page's one build step: bundle @ag-ui/client into static/vendor/ag-ui-client.js, and the official
// A2UI web renderer (@a2ui/lit's v0.9 <a2ui-surface> with its basic catalog, and @a2ui/web_core's
// MessageProcessor) into static/vendor/a2ui.js. The output is committed, so serving the example needs no Node;
// rerun (`npm ci && npm run build` here) after changing a version. It also writes static/vendor/LICENSES.txt:
// every package the two bundles hold (read from esbuild's metafile), its version, its license and the text of
// its own LICENSE/NOTICE files, which MIT, BSD and Apache-2.0 ask a copy to carry (the bundles keep only the
// comments marked legal). The same inputs give the same bytes, so a rebuild shows no diff.
import { build } from "esbuild";
import { readFileSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const common = {
  bundle: true,
  format: "esm",
  platform: "browser",
  target: "es2020",
  minify: true,
  legalComments: "eof",
  metafile: true,
};

const bundled = new Map(); // package folder (node_modules/...) -> the bundles holding it
const sources = new Map(); // package folder -> its bundled files (for a package that ships no LICENSE)

function note(result, bundle) {
  for (const input of Object.keys(result.metafile.inputs)) {
    const at = input.lastIndexOf("node_modules/");
    if (at < 0) continue;
    const rest = input.slice(at + "node_modules/".length).split("/");
    const name = rest[0].startsWith("@") ? `${rest[0]}/${rest[1]}` : rest[0];
    const folder = input.slice(0, at) + "node_modules/" + name;
    if (!bundled.has(folder)) bundled.set(folder, new Set()), sources.set(folder, new Set());
    bundled.get(folder).add(bundle);
    sources.get(folder).add(input);
  }
}

note(await build({
  ...common,
  stdin: { contents: 'export { HttpAgent } from "@ag-ui/client";', resolveDir: process.cwd(), loader: "js" },
  outfile: "../static/vendor/ag-ui-client.js",
}), "ag-ui-client.js");
console.log("wrote static/vendor/ag-ui-client.js");

note(await build({
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
}), "a2ui.js");
console.log("wrote static/vendor/a2ui.js");

// A package that ships no LICENSE file (@bufbuild/protobuf) states its notices at the top of its sources:
// each distinct leading comment block of the files bundled from it, which name its copyright holders.
function headers(folder, name) {
  const blocks = new Set();
  for (const file of [...sources.get(folder)].sort()) {
    const lines = [];
    for (const line of readFileSync(file, "utf8").split("\n")) {
      if (!line.startsWith("//")) break;
      lines.push(line.replace(/^\/\/ ?/, ""));
    }
    // up to its last line that speaks of the license (a doc comment may follow it with no blank line)
    const last = lines.findLastIndex((l) => /copyright|licen[cs]e|warrant|redistribut/i.test(l));
    if (last >= 0) blocks.add(lines.slice(0, last + 1).join("\n").trim());
  }
  if (!blocks.size) throw new Error(`${name} ships no LICENSE file and states no notice: add it here by hand`);
  return [...blocks].map((b) => `--- the notice at the top of its sources ---\n${b}`);
}

const rule = "=".repeat(78);
const sections = [];
for (const folder of [...bundled.keys()].sort()) {
  const meta = JSON.parse(readFileSync(join(folder, "package.json"), "utf8"));
  const files = readdirSync(folder).filter((f) => /^(licen[cs]e|notice|copying)/i.test(f)).sort();
  const texts = files.map((f) => `--- ${f} ---\n${readFileSync(join(folder, f), "utf8").trimEnd()}`);
  if (!texts.length) texts.push(...headers(folder, meta.name));
  sections.push(
    [
      rule,
      `${meta.name} ${meta.version}, license ${meta.license}, in ${[...bundled.get(folder)].sort().join(", ")}`,
      rule,
      ...texts,
    ].join("\n"),
  );
}
writeFileSync(
  "../static/vendor/LICENSES.txt",
  [
    "Third-party software in this folder's bundles (written by examples/fastapi_app/web/build.mjs).",
    "Each package's name, version and license, then the license and notice files it ships.",
    "",
    ...sections,
    "",
  ].join("\n"),
);
console.log(`wrote static/vendor/LICENSES.txt (${sections.length} packages)`);

// Build-time compression for `cargo xtask dist` (Node's own zlib; no packages needed).
//
// Usage: node tools/compress.mjs FILE...
// Writes FILE.br (brotli, quality 11, text or generic mode) and FILE.gz (gzip, level 9, no
// timestamp) next to each file, so the server sends these exact bytes and never compresses an
// asset per request. Prints one line per file: `name raw br gz` (sizes in bytes).
import { readFileSync, writeFileSync } from "node:fs";
import { basename } from "node:path";
import { brotliCompressSync, constants, gzipSync } from "node:zlib";

const text = /\.(css|html|js|json|svg|txt)$/;
for (const file of process.argv.slice(2)) {
  const raw = readFileSync(file);
  const br = brotliCompressSync(raw, {
    params: {
      [constants.BROTLI_PARAM_QUALITY]: constants.BROTLI_MAX_QUALITY,
      // A 4 MiB window (the default) holds the whole bundle; a larger one only costs decoders memory.
      [constants.BROTLI_PARAM_LGWIN]: constants.BROTLI_DEFAULT_WINDOW,
      [constants.BROTLI_PARAM_MODE]: text.test(file)
        ? constants.BROTLI_MODE_TEXT
        : constants.BROTLI_MODE_GENERIC,
      [constants.BROTLI_PARAM_SIZE_HINT]: raw.length,
    },
  });
  const gz = gzipSync(raw, { level: constants.Z_BEST_COMPRESSION });
  writeFileSync(`${file}.br`, br);
  writeFileSync(`${file}.gz`, gz);
  console.log(`${basename(file)} ${raw.length} ${br.length} ${gz.length}`);
}

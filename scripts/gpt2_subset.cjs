// Makes the committed offline fixture of the data/bpe test: the GPT-2 tokens that BPE forms on
// the way to encoding the given texts (all 256 bytes, every intermediate merge, every result),
// with their ids, and js-tiktoken's tokens for each text. With exactly these tokens at their
// ids, BPE merges as with the full vocabulary: each merge it makes is the full vocabulary's
// lowest-ranked pair, and that pair is in the subset.
//   node gpt2_subset.cjs NPM_DIR OUT_DIR TEXT...   -> OUT_DIR/subset.tsv (id TAB hex),
//                                                     OUT_DIR/<text name>.tokens (ids, one a line)
'use strict';
const fs = require('fs');
const path = require('path');
const [npmDir, outDir, ...texts] = process.argv.slice(2);
const mod = (p) => require(path.join(path.resolve(npmDir), 'node_modules', 'js-tiktoken', p));
const ranks = mod('dist/ranks/gpt2.cjs');
const { Tiktoken } = mod('dist/lite.cjs');
const enc = new Tiktoken(ranks);

const byHex = new Map();
for (const line of ranks.bpe_ranks.split('\n')) {
    const parts = line.split(' ');
    if (parts.length < 2) continue;
    const offset = parseInt(parts[1], 10);
    parts.slice(2).forEach((t, k) => byHex.set(Buffer.from(t, 'base64').toString('hex'), offset + k));
}
const need = new Map();
for (let b = 0; b < 256; b++) { const h = Buffer.from([b]).toString('hex'); need.set(byHex.get(h), h); }

function bpe(bytes) {  // naive lowest-rank-first merge, recording every token formed
    let parts = [...bytes].map((b) => Buffer.from([b]));
    for (;;) {
        let best = -1, bestRank = Infinity;
        for (let i = 0; i + 1 < parts.length; i++) {
            const r = byHex.get(Buffer.concat([parts[i], parts[i + 1]]).toString('hex'));
            if (r !== undefined && r < bestRank) { bestRank = r; best = i; }
        }
        if (best < 0) break;
        parts.splice(best, 2, Buffer.concat([parts[best], parts[best + 1]]));
        need.set(bestRank, parts[best].toString('hex'));
    }
    return parts.map((p) => byHex.get(p.toString('hex')));
}

const re = new RegExp(ranks.pat_str, 'gu');
for (const f of texts) {
    const text = fs.readFileSync(f, 'utf8');
    const mine = [];
    for (const m of text.matchAll(re)) mine.push(...bpe(Buffer.from(m[0], 'utf8')));
    const ref = enc.encode(text, [], []);
    if (mine.join(',') !== ref.join(',')) throw new Error(`${f}: naive BPE disagrees with js-tiktoken`);
    fs.writeFileSync(path.join(outDir, path.basename(f, '.txt') + '.tokens'), ref.join('\n') + '\n');
}
const rows = [...need.entries()].sort((a, b) => a[0] - b[0]).map(([id, h]) => `${id}\t${h}`);
fs.writeFileSync(path.join(outDir, 'subset.tsv'), rows.join('\n') + '\n');
console.log(`${rows.length} tokens`);

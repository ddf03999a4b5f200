// GPT-2 reference from npm's js-tiktoken (MIT; its gpt2 ranks are OpenAI's GPT-2 vocabulary,
// MIT). Used by scripts/gpt2_tokenizer.sh, the data/bpe_tiktoken test and bench/bpe_vs_tiktoken.sh.
//   node tiktoken_ref.cjs NPM_DIR convert OUT          llm.c tokenizer file (v2, eot 50256)
//   node tiktoken_ref.cjs NPM_DIR encode OUT FILE...   per file: u32le count, then u32le tokens
//   node tiktoken_ref.cjs NPM_DIR bench FILE...        prints "bytes tokens seconds"
'use strict';
const fs = require('fs');
const path = require('path');

const [npmDir, mode, ...args] = process.argv.slice(2);
const mod = (p) => require(path.join(path.resolve(npmDir), 'node_modules', 'js-tiktoken', p));
const ranks = mod('dist/ranks/gpt2.cjs');

function u32(v) { const b = Buffer.alloc(4); b.writeUInt32LE(v >>> 0); return b; }

if (mode === 'convert') {
    // bpe_ranks: lines "! OFFSET tok tok ..." (base64 bytes), token k of a line has rank OFFSET+k.
    const n = ranks.explicit_n_vocab;
    const eot = ranks.special_tokens['<|endoftext|>'];
    const tokens = new Array(n);
    for (const line of ranks.bpe_ranks.split('\n')) {
        const parts = line.split(' ');
        if (parts.length < 2) continue;
        const offset = parseInt(parts[1], 10);
        parts.slice(2).forEach((t, k) => { tokens[offset + k] = Buffer.from(t, 'base64'); });
    }
    tokens[eot] = Buffer.from('<|endoftext|>');
    const hdr = Buffer.alloc(1024);
    hdr.writeUInt32LE(20240328, 0); hdr.writeUInt32LE(2, 4); hdr.writeUInt32LE(n, 8);
    hdr.writeUInt32LE(eot, 12);
    const out = [hdr];
    for (let i = 0; i < n; i++) {
        if (!tokens[i] || tokens[i].length === 0 || tokens[i].length > 255) {
            throw new Error(`rank ${i} missing or unusable in js-tiktoken's gpt2 ranks`);
        }
        out.push(Buffer.from([tokens[i].length]), tokens[i]);
    }
    const tmp = args[0] + '.tmp';
    fs.writeFileSync(tmp, Buffer.concat(out), { mode: 0o644 });
    fs.renameSync(tmp, args[0]);
} else if (mode === 'encode' || mode === 'bench') {
    const { Tiktoken } = mod('dist/lite.cjs');
    const enc = new Tiktoken(ranks);
    const files = mode === 'encode' ? args.slice(1) : args;
    const texts = files.map((f) => fs.readFileSync(f, 'utf8'));
    const out = [];
    let ntok = 0, secs = Infinity;
    for (let pass = 0; pass < (mode === 'bench' ? 5 : 1); pass++) {  // bench: best of 5
        ntok = 0;
        const t0 = process.hrtime.bigint();
        for (const text of texts) {
            const toks = enc.encode(text, [], []);  // no special tokens: encode_ordinary
            ntok += toks.length;
            if (mode === 'encode') out.push(u32(toks.length), Buffer.from(Uint32Array.from(toks).buffer));
        }
        secs = Math.min(secs, Number(process.hrtime.bigint() - t0) / 1e9);
    }
    if (mode === 'encode') fs.writeFileSync(args[0], Buffer.concat(out));
    else {
        const bytes = texts.reduce((a, t) => a + Buffer.byteLength(t), 0);
        console.log(`${bytes} ${ntok} ${secs}`);
    }
} else {
    throw new Error('mode: convert | encode | bench');
}

// A proof of work for signing in to an account under a password-guessing attack
// (app/core/proof_of_work.py): the first counter N such that SHA-256("challenge:N") starts
// with `bits` zero bits. The message always fits one SHA-256 block, and only the digest's
// first word is needed, so this is one compression per try, in plain JavaScript (Web
// Crypto's digest is a promise per hash: slower by far for millions of tiny messages).

const K = new Uint32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);
const H = [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19];
const w = new Uint32Array(64);

// The first 32 bits of SHA-256 of one padded 64-byte block.
function firstWord(block) {
  for (let i = 0; i < 16; i++) {
    w[i] = (block[4 * i] << 24) | (block[4 * i + 1] << 16) | (block[4 * i + 2] << 8) | block[4 * i + 3];
  }
  for (let i = 16; i < 64; i++) {
    const x = w[i - 15], y = w[i - 2];
    const s0 = ((x >>> 7) | (x << 25)) ^ ((x >>> 18) | (x << 14)) ^ (x >>> 3);
    const s1 = ((y >>> 17) | (y << 15)) ^ ((y >>> 19) | (y << 13)) ^ (y >>> 10);
    w[i] = (w[i - 16] + s0 + w[i - 7] + s1) | 0;
  }
  let [a, b, c, d, e, f, g, h] = H;
  for (let i = 0; i < 64; i++) {
    const S1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
    const t1 = (h + S1 + ((e & f) ^ (~e & g)) + K[i] + w[i]) | 0;
    const S0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
    const t2 = (S0 + ((a & b) ^ (a & c) ^ (b & c))) | 0;
    h = g; g = f; f = e; e = (d + t1) | 0; d = c; c = b; b = a; a = (t1 + t2) | 0;
  }
  return (H[0] + a) >>> 0;
}

// The counter, as a string; onProgress(tries) now and then, between which the page stays
// responsive. Each try is expected 1 time in 2^bits.
export async function solve(challenge, bits, onProgress) {
  const prefix = new TextEncoder().encode(`${challenge}:`);
  const block = new Uint8Array(64);
  block.set(prefix);
  for (let counter = 0; ; counter++) {
    const digits = String(counter);
    let n = prefix.length;
    for (let i = 0; i < digits.length; i++) block[n++] = digits.charCodeAt(i);
    block[n] = 0x80;
    block.fill(0, n + 1, 60);
    const length = n * 8;  // bits, big-endian in the block's last 8 bytes (under 2^32 here)
    block[60] = length >>> 24; block[61] = (length >>> 16) & 255; block[62] = (length >>> 8) & 255; block[63] = length & 255;
    if (Math.clz32(firstWord(block)) >= bits) return digits;
    if (counter % 65536 === 65535) {
      if (onProgress) onProgress(counter + 1);
      await new Promise((resolve) => setTimeout(resolve, 0));
    }
  }
}

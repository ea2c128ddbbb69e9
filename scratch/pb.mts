import { progressBar } from '../src/http/stream.js';
console.log(JSON.stringify([progressBar(36445,3001127), progressBar(36445,1069207), progressBar(1069207,1069207), progressBar(32768,3001127), progressBar(512), progressBar(100000, 2500000)]));

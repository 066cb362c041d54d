// One guess per line; each reply arrives as a line on stdin.
const fs = require('fs');

function readLine() {
  const bytes = [];
  const one = Buffer.alloc(1);
  while (fs.readSync(0, one, 0, 1, null) === 1 && one[0] !== 10) bytes.push(one[0]);
  return Buffer.from(bytes).toString().trim();
}

let lo = 1;
let hi = 1000;
while (lo <= hi) {
  const mid = Math.floor((lo + hi) / 2);
  fs.writeSync(1, mid + '\n');
  const reply = readLine();
  if (reply === 'correct' || reply === '') break;
  if (reply === 'lower') hi = mid - 1;
  else lo = mid + 1;
}

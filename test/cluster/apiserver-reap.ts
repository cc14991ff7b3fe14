/**
 * `node dist/test/cluster/apiserver-reap.js <runner pid>`: run by scripts/test.sh after the
 * test runner has exited, so nothing of the run's shared API server
 * (apiserver-shared.ts) outlives the run: waits for its supervisor to stop etcd and
 * kube-apiserver and remove their dirs, and kills and removes what it left. Prints one
 * line when there was something to stop; exits 0 either way, 2 on bad usage.
 */
import { reapOwner } from './apiserver-shared.js';

const owner = Number(process.argv[2]);
if (!Number.isInteger(owner) || owner <= 0) {
  process.stderr.write('usage: apiserver-reap.js <test runner pid>\n');
  process.exit(2);
}
const how = await reapOwner(owner);
if (how === 'killed')
  process.stdout.write(`the shared test API server of ${owner} was killed (its supervisor did not stop it)\n`);
else if (how === 'stopped') process.stdout.write(`the shared test API server of ${owner} stopped\n`);

/**
 * The transparency-log verifier `writ verify` uses: the receipt log verifier of src/verify/log.ts
 * (C2SP tlog-proof against a checkpoint signed, under the tenant log's origin, by a key of the
 * issuer's key set: pinned with `--keys`, else the bundle's own), and with `--witness` the same
 * verifier requiring a quorum of witness cosignatures on that checkpoint. Offline: no network.
 */
export {
  receiptLogVerifier as cliLogVerifier,
  witnessedLogVerifier as cliWitnessedLogVerifier,
} from '../verify/log.js';

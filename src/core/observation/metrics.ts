/**
 * Counters that show tool-output injection risk (spec ch. 12, "Security and performance":
 * rejections by cause, signals by tool and source release).
 *
 * Guarantees: the counters are a pure function of a receipt, with bounded label values (codes,
 * digests, releases), never payload text.
 * Never: records content, reads a clock, or does I/O (the adapter exports the counters).
 */
import type { ObservationReceipt } from './schema.js';

export interface ObservationMetric {
  readonly name: 'observations_total' | 'observation_rejections_total' | 'observation_signals_total';
  readonly labels: Readonly<Record<string, string>>;
  readonly value: 1;
}

/** The counter increments one receipt contributes, in a stable order. */
export function observationMetrics(receipt: ObservationReceipt): ObservationMetric[] {
  const b = receipt.body;
  const out: ObservationMetric[] = [
    {
      name: 'observations_total',
      labels: { decision: b.decision, media_type: b.media_type, content_kind: b.content_kind },
      value: 1,
    },
  ];
  for (const violation of b.violations) {
    out.push({ name: 'observation_rejections_total', labels: { violation }, value: 1 });
  }
  for (const hit of b.signal_hits) {
    out.push({
      name: 'observation_signals_total',
      labels: {
        signal: hit.signal,
        rule: hit.rule,
        encoding: hit.encoding,
        tool_contract_sha256: b.tool_contract_sha256,
        source_release: b.source_release,
      },
      value: 1,
    });
  }
  return out;
}

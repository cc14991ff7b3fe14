/**
 * What ipamd watches in the cloud's answers, wired once by daemon.ts: EC2 throttling (so
 * an ADD that gets no address can name it; cloud/throttle-watch.ts) and answers that do not
 * parse (refused whole, the last good view stays; logged at warn with the field and counted:
 * cloud/answer-parse.ts, docs/design.md#bounds-on-bad-input).
 */
import type { AnswerParseError } from './answer-parse.js';
import type { Ec2CallObserver } from './ec2-options.js';
import { createThrottleWatch, type ThrottleWatch } from './throttle-watch.js';
import type { Logger } from '../log.js';

/** The hooks to spread into the EC2 options, and the throttle watch. */
export interface CloudAnswerWatch {
  throttle: ThrottleWatch;
  /** EC2 options: `observe` (the metrics' observer behind the throttle watch) and `onParseError`. */
  ec2Hooks: { observe: Ec2CallObserver; onParseError: (e: AnswerParseError) => void };
}

/** Builds the watch over ipamd's log and metrics (`observe`: the metrics' EC2 observer). */
export function watchCloudAnswers(
  log: Logger,
  metrics: { answerParseError(e: AnswerParseError): void; ec2: { observe: Ec2CallObserver } },
): CloudAnswerWatch {
  const throttle = createThrottleWatch();
  return {
    throttle,
    ec2Hooks: {
      observe: throttle.observe((...a) => metrics.ec2.observe(...a)),
      onParseError: (e) => {
        log.warn(
          { source: e.source, where: e.where, field: e.field, value: e.value },
          'cloud answer did not parse; kept the last good view',
        );
        metrics.answerParseError(e);
      },
    },
  };
}

export {
  countedClassGuard,
  countedErrorClasses,
  countsInTable,
  errorClasses,
  errorPolicy,
  errorTable,
  ignoredErrorClasses,
  isCountedErrorClass,
  isIgnoredErrorClass,
  isProviderSideIn,
  ownClasses,
} from './error-class.js';
export type {
  ApiAnswer,
  CountedErrorClass,
  ErrorClass,
  ErrorPolicy,
  ErrorRow,
  ErrorTable,
  IgnoredErrorClass,
  ProviderFailure,
} from './error-class.js';
export {
  clipText,
  invalidOutputMessage,
  invalidOutputMessagePrefix,
  maxReasonChars,
  maxReasonsChars,
  maxReportedReasons,
  reasonsOfInvalidOutputMessage,
  summarizeValidationErrors,
} from './validation-reasons.js';

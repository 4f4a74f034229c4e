export {
  countedClassGuard,
  countedErrorClasses,
  countsInTable,
  errorClasses,
  errorPolicy,
  errorTable,
  ignoredErrorClasses,
  
  
  isProviderSideIn,
  keyVerdictInTable,
  ownClasses,
} from './error-class.js';
export type {
  
  CountedErrorClass,
  ErrorClass,
  
  ErrorRow,
  ErrorTable,
  IgnoredErrorClass,
  
  ProviderFailure,
} from './error-class.js';
export {
  clipText,
  invalidOutputMessage,
  
  
  maxReasonsChars,
  
  reasonsOfInvalidOutputMessage,
  summarizeValidationErrors,
} from './validation-reasons.js';

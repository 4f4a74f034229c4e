export {
  countedErrorClasses,
  ignoredErrorClasses,
  errorClasses,
  errorPolicy,
  isCountedErrorClass,
} from './error-class.js';
export type { CountedErrorClass, IgnoredErrorClass, ErrorClass, ErrorPolicy, ProviderFailure } from './error-class.js';

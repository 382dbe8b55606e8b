"""Model architectures (thinc), registered in `@architectures`: what a trainable
component computes, apart from the component that trains and applies it."""
